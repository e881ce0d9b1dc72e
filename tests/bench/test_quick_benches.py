"""Every bench the docs name runs, in its quick form, in `make test`.

`docs/performance.md` and the pages beside it send users to `python -m bench.X` and to
`make bench`; a bench nobody ran since its code moved crashes in the user's hands (`make bench`
did: `'WrappedFifo' object has no attribute 'moves'`). So each bench has a quick form
(`--quick`, `bench.parsed`): every section at the smallest size that still goes through its
code, the peers that are installed from the network and the long waits left out. Here each
runs so, to its end, on the real servers it starts (PostgreSQL, redis-server, nats-server,
Tansu, moto, the emulators, the API-server stand-in). Nothing is asserted on its figures:
a quick form's are not figures. What is asserted: it ends with status 0, prints what it
measured, and leaves no traceback - and a bench that checks a promise as it measures (the
kill drive: nothing lost, nothing run twice) exits non-zero when the promise breaks.

Which benches there are is read from `bench/` (a module that runs as a command), and which the
docs name from the docs: a name in the docs that is neither a bench nor a part one of them
runs is a finding of its own.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "bench"

# Modules of bench/ that are run by other benches rather than by hand, and who runs them.
RUN_BY_OTHERS = {
    "local_floor": "bench.local, bench.local_cpu, bench.fleet and bench.fleet_process",
    "fleet_ledger": "bench.sharing (its at-rest and ceiling sections)",
    "serving": "bench.ambassador, bench.object_store",
    "stream_servers": "bench.streams",
    "peers": "bench.fleet and bench.fleet_process (PgQueuer and procrastinate, not quick)",
    "__init__": "every bench (bench.parsed)",
}
MAKE_BENCH = "workqueue"  # `make bench` runs it: run below through make

pytestmark = pytest.mark.timeout(900)  # a bench's quick form runs for a minute or two when loaded


def benches() -> list[str]:
    """The modules of bench/ that run as a command, those run by others left out."""
    return sorted(
        path.stem
        for path in BENCH.glob("*.py")
        if 'if __name__ == "__main__":' in path.read_text() and path.stem not in RUN_BY_OTHERS
    )


def named_in_docs() -> dict[str, str]:
    """Each bench module the docs, the README and the examples' READMEs name, and where."""
    pages = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md")),
             *sorted((REPO / "examples").glob("*/README.md"))]  # fmt: skip
    found: dict[str, str] = {}
    for page in pages:
        for match in re.finditer(r"\bbench[./]([a-z_]+)", page.read_text()):
            found.setdefault(match.group(1), str(page.relative_to(REPO)))
    return found


def run_to_its_end(command: list[str], timeout: float = 900) -> subprocess.CompletedProcess:
    """`command` from the repository's root in a session of its own: on a timeout its whole
    group is killed (a bench's servers with it) before the test fails."""
    env = {**os.environ, "AWS_EC2_METADATA_DISABLED": "true", "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True,
                               start_new_session=True)  # fmt: skip
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate()
        pytest.fail(f"{' '.join(command)} did not end in {timeout:.0f} s:\n{out[-3000:]}\n"
                    f"{err[-3000:]}")  # fmt: skip
    return subprocess.CompletedProcess(command, process.returncode, out, err)


def ended_well(done: subprocess.CompletedProcess) -> None:
    said = f"{done.stdout[-3000:]}\n--- stderr ---\n{done.stderr[-4000:]}"
    assert done.returncode == 0, said
    assert "Traceback" not in done.stderr, said
    assert done.stdout.strip(), said  # it printed what it measured


def test_every_bench_the_docs_name_is_run_here():
    runnable = set(benches())
    unknown = {name: page for name, page in named_in_docs().items()
               if name not in runnable and name not in RUN_BY_OTHERS}  # fmt: skip
    assert not unknown, f"named in the docs, but no bench runs it: {unknown}"
    assert MAKE_BENCH in runnable
    # each bench reads --quick (a module that forgot it would exit 2 on the flag, below)
    for name in runnable:
        assert "--quick" in (BENCH / f"{name}.py").read_text(), name


@pytest.mark.parametrize("name", [n for n in benches() if n != MAKE_BENCH])
def test_the_bench_runs_in_its_quick_form(name):
    ended_well(run_to_its_end([sys.executable, "-m", f"bench.{name}", "--quick"]))


def test_make_bench_runs_in_its_quick_form():
    """`make bench` as users type it, with the quick form's flag (`BENCH_ARGS`)."""
    done = run_to_its_end(["make", "--no-print-directory", "bench", "BENCH_ARGS=--quick"])
    ended_well(done)
    assert f"bench.{MAKE_BENCH} --quick" in done.stdout  # the command make ran, echoed
