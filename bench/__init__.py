"""Benchmarks: scripts that print figures side by side with a peer.

Run each from the repository root as a module (`python -m bench.local`), so `ambassador`,
`manager` and the tests' support package (`tests.support`) import as packages - no `sys.path`
edits, and no script named like a package can shadow it.

Importing it compiles the project's bytecode (`_compiled`), as `make test` does: where
PYTHONDONTWRITEBYTECODE is set (this project's CI machines, and the shells of many others),
nothing else writes it, and every `workqueue` process a bench launches compiled the project
again at its start - an empty `workqueue run --ledger` took 0.53-0.63 s of CPU so against
0.27-0.30 s compiled (three runs each, 2026-12-06), a quarter of a second more a manager in
every figure of a fleet's drain and of a local run's start-up.
"""

import compileall
from pathlib import Path


def _compiled() -> None:
    """The project's sources compiled where their bytecode is missing or stale (a look at each
    file's time when all is compiled: about 50 ms)."""
    compileall.compile_dir(Path(__file__).resolve().parent.parent / "src", quiet=2)


_compiled()


def spread(values: list[float], form: str = ",.0f") -> str:
    """min / median / max of `values` (a run's rounds), each written as `form` says - the way
    every bench reports a figure it repeated."""
    ordered = sorted(values)
    return " / ".join(f"{v:{form}}" for v in (ordered[0], ordered[len(ordered) // 2], ordered[-1]))
