"""Benchmarks: scripts that print figures side by side with a peer.

Every bench has a quick form (`--quick`): each section of it run at the smallest size that
still goes through all of its code, peers and long waits left out, so that `make test` runs
every bench the docs name (tests/bench/test_quick_benches.py) and a bench that no longer runs
is a red suite, not a user's surprise. Its figures are not figures: nothing is concluded from
them.

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

import argparse
import atexit
import compileall
import contextlib
import shutil
import tempfile
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


def parsed(parser: argparse.ArgumentParser, quick: dict[str, object]) -> argparse.Namespace:
    """The bench's arguments with `--quick` among them: with it, every option named in `quick`
    that the command line left at its default takes the value `quick` gives it (an option
    given by hand keeps its value). The bench then reads `args.quick` for what is not a size:
    a peer left out, a wait cut short - and says so in what it prints."""
    parser.add_argument(
        "--quick", action="store_true",
        help="the smallest form that runs every section (make test runs it); no figures",
    )  # fmt: skip
    args = parser.parse_args()
    if args.quick:
        for name, value in quick.items():
            if getattr(args, name) == parser.get_default(name):
                setattr(args, name, value)
    return args


_SHARED_SERVER: list = []  # the quick form's one PostgreSQL, while `shared_postgres` holds it


class _Lent:
    """The shared server, lent to one section: the server's own in all (`database()`, `data`,
    `url`), except that `close()` and `stop()` leave it running for the next."""

    def __init__(self, server) -> None:
        self._server = server

    def __getattr__(self, name: str):
        return getattr(self._server, name)

    def close(self) -> None:
        pass

    def stop(self) -> None:
        pass


def postgres_server():
    """A PostgreSQL for one measurement (`tests.support.postgres.PostgresServer`): a fresh
    server each time, so that nothing one measurement left cached or bloated weighs on the
    next - or, inside `shared_postgres(True)` (the quick form), the one server every section
    shares. Caller's duty: each measurement on a database of its own (`database()`), and
    `close()` when done (a no-op on the shared one)."""
    if _SHARED_SERVER:
        return _Lent(_SHARED_SERVER[0])
    from tests.support.postgres import PostgresServer

    return PostgresServer()


@contextlib.contextmanager
def shared_postgres(wanted: bool):
    """With `wanted`, one server for every `postgres_server()` within (a server's start is a
    second and a half of CPU: the quick form's sections would spend more starting servers
    than measuring); without, nothing changes."""
    if not wanted:
        yield
        return
    from tests.support.postgres import PostgresServer

    _SHARED_SERVER.append(PostgresServer())
    try:
        yield
    finally:
        _SHARED_SERVER.pop().close()


def scratch(prefix: str) -> Path:
    """A new folder for this run's files, removed when the bench ends (however its sections
    end, short of a kill): benches make large folders in /tmp, and one left behind by each run
    fills it."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder
