# Two commands do all set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: test demo lab bench lint clean

# The environment: created when missing, reinstalled when pyproject.toml changes.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

demo: $(STAMP)
	$(BIN)/workqueue lab --slow --duration 15 --seed 1

lab: $(STAMP)
	$(BIN)/workqueue lab

bench: $(STAMP)
	$(BIN)/python bench/workqueue.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis .workqueue
