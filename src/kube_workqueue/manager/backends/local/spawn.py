"""The worker's program, found once, and the environment every worker gets.

`Spawner` finds the program on PATH once (a missing one fails at the first item, one line),
copies the environment once - less every credential the queue's own parts read
(`worker_environment`): the manager's own (`MANAGER_OWN`: the ledger's URL, the dashboard's
token, a source URL), libpq's on a shared ledger (`LIBPQ`: without one, no part of the queue
reads them - they are the user's), and what the caller names - the
source clients' and the cloud clients' (`REDIS_PASSWORD`, `AZURE_STORAGE_CONNECTION_STRING`,
`AWS_SECRET_ACCESS_KEY`, ...: `ambassador.sources.registry.credential_variables`, handed down
by the assembly). An item's worker must never be able to write the ledger, read the
dashboard, or write to or delete the queue's own source. What a worker does need (fetch-run-put
reading an `azblob://` input) the user names: `--worker-env NAME` passes that one on. Which
ones were held back is said once, at the first worker, so a worker that misses one is
explained. It also marks what this process inherited close-on-exec, so that a keeper it
starts - and the workers that keeper's shims start - get descriptors 0, 1 and 2 only (Python,
SQLite and the file watcher open theirs close-on-exec; what can be inheritable is what the
manager was handed when it started, by its parent shell or a test runner). Workers are started
by the keeper's shims (`keeper.py`, `shim.py`), never by the manager itself: their ends must
outlive it - and the keeper is started with the workers' environment, not the manager's.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from collections.abc import Iterable

from ...errors import UserError

log = logging.getLogger(__name__)

# the manager's own secrets, never a worker's (`WORKQUEUE_<FLAG>` of secret-bearing flags)
MANAGER_OWN = frozenset({"WORKQUEUE_LEDGER", "WORKQUEUE_UI_TOKEN", "WORKQUEUE_SOURCE"})
# libpq's connection settings and credentials: a shared ledger's
LIBPQ = frozenset({
    "PGPASSWORD", "PGPASSFILE", "PGUSER", "PGHOST", "PGHOSTADDR", "PGPORT", "PGDATABASE",
    "PGSERVICE", "PGSERVICEFILE", "PGSSLKEY", "PGSSLCERT", "PGSSLROOTCERT", "PGSSLPASSWORD",
    "PGOPTIONS", "PGREQUIRESSL", "PGSSLMODE", "PGKRBSRVNAME", "PGGSSLIB", "PGTARGETSESSIONATTRS",
})  # fmt: skip
_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def withheld_variables(credentials: Iterable[str] = (), *,
                       shared_ledger: bool = False) -> frozenset[str]:  # fmt: skip
    """What no worker inherits unless named by `--worker-env`: the manager's own, libpq's on
    a shared ledger, and `credentials` (the sources' and cloud clients', from the registry)."""
    own = MANAGER_OWN | LIBPQ if shared_ledger else MANAGER_OWN
    return own | frozenset(credentials)


def passed_variable(text: str) -> str:
    """A `--worker-env` word: an environment variable's name, not one of the manager's own."""
    name = text.strip()
    if not _VARIABLE.fullmatch(name):
        raise UserError(f"{text!r} is not an environment variable's name")
    if name in MANAGER_OWN:
        raise UserError(
            f"{name} is the queue's own and never a worker's (the ledger, the "
            "dashboard's token, the source): give the worker what it needs itself"
        )
    return name


def worker_environment(env: dict[str, str], credentials: Iterable[str] = (),
                       passed: Iterable[str] = (), *,
                       shared_ledger: bool = False) -> dict[str, str]:  # fmt: skip
    """`env` less what a worker must not have (see the module docstring), but for `passed`."""
    withheld = withheld_variables(credentials, shared_ledger=shared_ledger) - set(passed)
    return {k: v for k, v in env.items() if k not in withheld}


class Spawner:
    """What the keeper starts again and again: `argv` with `env` (None: the manager's own
    environment, as it is at construction) less the queue's credentials
    (`worker_environment`: `credentials` and the manager's own, but for `passed`), plus one
    variable that changes per item."""

    def __init__(
        self, argv: list[str], env: dict[str, str] | None = None, *,
        credentials: Iterable[str] = (), passed: Iterable[str] = (), shared_ledger: bool = False,
    ) -> None:  # fmt: skip
        inherited = dict(os.environ if env is None else env)
        self.base_env = worker_environment(inherited, credentials, passed,
                                           shared_ledger=shared_ledger)  # fmt: skip
        held_back = sorted(set(inherited) - set(self.base_env))
        if held_back:
            log.info("workers do not get %s - the queue's own credentials; --worker-env NAME "
                     "passes one on", ", ".join(held_back))  # fmt: skip
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
