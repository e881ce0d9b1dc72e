"""A local manager on a shared ledger (`--ledger postgresql://…`): many machines, one queue.

The record of the items is the database's (`manager.fleet.ledger.PostgresLedger`); what stays
in the state directory is this machine's: the workers' logs and item files, the keeper's
journal, and `manager-id` - the manager's name in the ledger's claims, made once and kept, so
a manager restarted on the same directory takes back what it held (as `recovery.take_back`
does for the SQLite ledger) instead of waiting for its own claims to run out.

Two differences from the embedded ledger, both for exactly once across machines:

  * the workers end with their manager (`LocalBackend(end_with_manager=True)`): a manager that
    dies stops renewing its claims, and once they run out another manager runs the items -
    a worker of the dead one left running would run beside it. Its keeper kills them at once
    and journals them interrupted; a restart of the manager puts them back in line;
  * the state directory is still held by one manager at a time (its lock file), since the
    keeper's files and the logs are per machine - each manager has a state directory of its
    own, whatever ledger it shares.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket

from ...fleet.joining import FleetRunner

ID_FILE = "manager-id"


def manager_id(state_dir: str) -> str:
    """This state directory's manager id (made at first use): host name and a random part."""
    path = os.path.join(state_dir, ID_FILE)
    try:
        with open(path) as f:
            known = f.read().strip()
        if known:
            return known
    except FileNotFoundError:
        pass
    host = "".join(c for c in socket.gethostname() if c.isalnum() or c in "-.")[:40]
    made = f"{host or 'manager'}-{secrets.token_hex(4)}"
    with open(path, "w") as f:
        f.write(made + "\n")
    return made


def fleet_runner(options, settle_at_start,
                 credentials: frozenset[str] = frozenset()) -> FleetRunner:  # fmt: skip
    """The process runner on a shared ledger (`manager.fleet.joining.join` opens the ledger):
    the state directory locked and made when missing, its manager id, and the start hook
    `settle_at_start(backend, state_dir)` (the one the SQLite ledger's start uses too);
    `credentials`: what its workers never inherit (`spawn.worker_environment`)."""
    from .ledger_file import lock_state_dir
    from .process import LocalBackend

    state_dir = os.path.abspath(options.state_dir)
    if not os.path.lexists(state_dir):  # the workers' item files and logs: this user's only
        with contextlib.suppress(OSError):  # (what fails is said by the lock below)
            os.makedirs(state_dir, mode=0o700)
    held = lock_state_dir(state_dir)
    try:
        owner = manager_id(state_dir)
        backend = LocalBackend(
            options.worker_argv,
            state_dir,
            timeout=options.timeout,
            end_with_manager=True,
            credentials=credentials,
            passed=tuple(options.worker_env),
        )
    except BaseException:
        held.close()
        raise

    def close() -> None:
        try:
            backend.close()
        finally:
            held.close()

    return FleetRunner(backend, owner, settle_at_start(backend, state_dir), close)
