"""The worker's program, found once, and the environment every worker gets.

`Spawner` finds the program on PATH once (a missing one fails at the first item, one line),
copies the environment once - less the manager's own secrets (`WITHHELD`: the ledger's URL,
the dashboard's token, a source URL; and on a shared ledger libpq's credentials, `LIBPQ`): an
item's worker must never be able to write the ledger or read the dashboard. It also marks what
this process inherited close-on-exec, so that a keeper it starts - and the workers that
keeper's shims start - get descriptors 0, 1 and 2 only (Python, SQLite and the file watcher
open theirs close-on-exec; what can be inheritable is what the manager was handed when it
started, by its parent shell or a test runner). Workers are started by the keeper's shims
(`keeper.py`, `shim.py`), never by the manager itself: their ends must outlive it.
"""

from __future__ import annotations

import os
import shutil

# the manager's own secrets, never a worker's (`WORKQUEUE_<FLAG>` of secret-bearing flags)
WITHHELD = frozenset({"WORKQUEUE_LEDGER", "WORKQUEUE_UI_TOKEN", "WORKQUEUE_SOURCE"})
# libpq's connection settings and credentials: a shared ledger's, withheld on one
LIBPQ = frozenset({
    "PGPASSWORD", "PGPASSFILE", "PGUSER", "PGHOST", "PGHOSTADDR", "PGPORT", "PGDATABASE",
    "PGSERVICE", "PGSERVICEFILE", "PGSSLKEY", "PGSSLCERT", "PGSSLROOTCERT", "PGSSLPASSWORD",
    "PGOPTIONS", "PGREQUIRESSL", "PGSSLMODE", "PGKRBSRVNAME", "PGGSSLIB", "PGTARGETSESSIONATTRS",
})  # fmt: skip


def worker_environment(env: dict[str, str], *, shared_ledger: bool = False) -> dict[str, str]:
    """`env` less what a worker must not have (see the module docstring)."""
    withheld = WITHHELD | LIBPQ if shared_ledger else WITHHELD
    return {k: v for k, v in env.items() if k not in withheld}


class Spawner:
    """What the keeper starts again and again: `argv` with `env` (None: the manager's own
    environment, as it is at construction) less the manager's secrets (`worker_environment`),
    plus one variable that changes per item."""

    def __init__(
        self, argv: list[str], env: dict[str, str] | None = None, *, shared_ledger: bool = False
    ) -> None:
        self.base_env = worker_environment(
            dict(os.environ if env is None else env), shared_ledger=shared_ledger
        )
        path = self.base_env.get("PATH", os.defpath)
        program = argv[0]
        if os.sep not in program:
            found = shutil.which(program, path=path)
            if found is None:
                raise FileNotFoundError(2, "No such file or directory", program)
            program = found
        self.program = program
        self.argv = list(argv)
        close_inherited()


def close_inherited() -> None:
    """Mark what this process inherited (descriptors above 2 its parent left open) close-on-
    exec, so that a process it starts gets 0, 1 and 2 only."""
    for fd in _inheritable():
        os.set_inheritable(fd, False)


def _inheritable() -> list[int]:
    """This process's inheritable descriptors above 2."""
    found = []
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        return found
    for entry in names:
        fd = int(entry)
        if fd <= 2:
            continue
        try:
            if os.get_inheritable(fd):
                found.append(fd)
        except OSError:  # closed meanwhile (or the listing's own descriptor)
            continue
    return found
