"""A manager joins a fleet: the assembly opens the shared ledger, the backend settles what it held.

Which ledger a manager keeps is the assembly's choice (`manager.assembly`), not the backend's:
its own - the state directory's SQLite file, the cluster's record - or, with `--ledger
postgresql://…`, the one a fleet shares. A backend that can work a shared queue gives one
function, `fleet_runner(options, seeds) -> FleetRunner`: its runner set up as without a
shared ledger, the name it goes by in the claims, and one start hook.

    owner    the runner's name in the ledger's claims, kept where its next start finds it
             (the state directory's `manager-id`; a cluster installation's ConfigMap), so a
             restart takes back what it held instead of waiting for its claims to run out
    drain    `--drain true|false` (a WorkQueue's `drain`): written for `owner` before the
             runner claims anything; unset, the ledger's drains stand (`workqueue drain`)
    settle   the start hook: what `owner` held running when it last stopped, put right -
             adopted where its work still runs, its outcome recorded where it ended while no
             manager ran, back in line where no work was started for it
    close    stops the runner (the ledger is closed after it, by `join`)

Everything else is written once, here: the ledger opened under that owner, the hook run, the
claims that never started let go (`let_go_unstarted`), who the manager is said once, and the
closing order (the runner first, so no end is reported to a closed ledger). Like the ledger's
opening, the start's last statements ride out a database that does not answer for a while
(`riding_out_a_lost_connection`): a connection ended under them is no reason to exit. A
backend without `fleet_runner` cannot share a ledger, and says so in one line.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..errors import UserError
from ..faults import LEDGER_ERROR, StorageFault
from ..placement import Placement
from ..ports import Backend, Elector, State
from ..setup_parts import ManagerSeeds, Parts, SharesALedger
from . import manager_statements as managers_sql
from .database import Database
from .ledger import PostgresLedger

log = logging.getLogger(__name__)
RETRY_PAUSE_SECONDS = 0.2  # between two tries of the start's last statements
STARTUP_SECONDS = 10.0  # how long a manager's start rides out a database that does not answer
T = TypeVar("T")


@dataclass
class FleetRunner:
    """What a backend hands `join`: see the module docstring. `owner_is` words whose claims
    they are in the log line ("this manager", "this installation"); `offers`, facts the
    backend found true of where its work runs (a cluster's node labels), offered beside
    `--offers`."""

    backend: Backend
    owner: str
    settle: Callable[[PostgresLedger], None]
    close: Callable[[], None]
    elector: Elector | None = None
    owner_is: str = "this manager"
    fence: Callable[[float], bool] = lambda timeout: True  # `Parts.fence`, the runner's part
    offers: dict[str, str] = field(default_factory=dict)


def join(backend_package: Any, backend_name: str, options: Any, seeds: ManagerSeeds) -> Parts:
    """The parts of a manager of `backend_package` on the shared ledger `options.ledger` (with
    `options.lease`): its runner from the backend's `fleet_runner`, what it held settled. The
    caller's duty: `Parts.close()`."""
    if not isinstance(backend_package, SharesALedger):
        raise UserError(f"the {backend_name} backend cannot share a --ledger")
    runner = backend_package.fleet_runner(options, seeds)
    ledger = None
    try:
        ledger = open_shared(
            options.ledger, runner.owner, lease=options.lease, max_attempts=seeds.max_attempts,
            retry_backoff=seeds.retry_backoff,
            placement=Placement([*runner.offers.items(), *options.offers], options.needs,
                                options.prefers, options.spill_after,
                                from_data=options.needs_from_data),  # fmt: skip
        )  # fmt: skip
        runner.settle(ledger)
        drained = riding_out_a_lost_connection(
            lambda: settle_claims_and_drain(ledger, runner.owner, options.drain),
            pause=RETRY_PAUSE_SECONDS,
        )
    except BaseException:
        try:
            runner.close()
        finally:
            if ledger is not None:
                ledger.close()
        raise
    log.info("shared ledger %s: %s is %s (its claims outlive its heartbeat by %gs)",
             ledger.where, runner.owner_is, runner.owner, options.lease)  # fmt: skip
    if drained and options.drain:  # declared: a restart declares it again - undo it there
        log.warning("%s is drained: it takes nothing new, the other managers do (it was "
                    "started with --drain true - a WorkQueue's spec.drain: set it false to give "
                    "it work again; `workqueue drain --undo` lasts only until its restart)",
                    runner.owner)  # fmt: skip
    elif drained:
        log.warning("%s is drained: it takes nothing new, the other managers do (workqueue "
                    "drain --undo %s --ledger ... gives it work again)", runner.owner,
                    runner.owner)  # fmt: skip

    def close() -> None:
        try:
            runner.close()
        finally:
            ledger.close()

    def fence(timeout: float) -> bool:
        return runner.fence(timeout) & ledger.db.fence(timeout)

    return Parts(ledger=ledger, backend=runner.backend, close=close, elector=runner.elector,
                 fence=fence)  # fmt: skip


def settle_claims_and_drain(ledger: PostgresLedger, owner: str, drain: bool | None) -> bool:
    """The start's last statements, each one safe to run again: the claims `owner` never
    started let go, `--drain true|false` written (`NamesALedger`: before any claim; None
    leaves the ledger's drains as they stand), and whether `owner` is drained."""
    let_go_unstarted(ledger)
    if drain is not None:
        ledger.db.run(managers_sql.DRAIN if drain else managers_sql.UNDRAIN, manager=owner)
    return bool(ledger.db.run(managers_sql.IS_DRAINED, owner=owner)[0][0])


def let_go_unstarted(ledger: PostgresLedger) -> None:
    """Claims the owner took and never started (it stopped between claim and start) go back in
    line at once: nothing of them ran, and another manager may take them now."""
    for name, state, _ in ledger.owned():
        if state != State.RUNNING:
            ledger.release(name)


def open_shared(
    url: str,
    owner: str,
    *,
    lease: float,
    max_attempts: int,
    retry_backoff: tuple[float, float],
    placement: Placement | None = None,
) -> PostgresLedger:
    """A manager's shared ledger at `url` under `owner`, its schema brought up to date and
    this manager registered; a failed retry waits `retry_backoff` (first wait, cap) doubling,
    as the manager's own retries do. A database that does not answer is tried again for
    `STARTUP_SECONDS` (a connection lost at start is no reason to give up); its connections are
    closed again when it cannot be opened."""
    from ..retry import Backoff

    backoff = Backoff(*retry_backoff)

    def opened() -> PostgresLedger:
        db = Database(url)
        ledger = None
        try:
            ledger = PostgresLedger(
                db, owner, lease=lease, max_attempts=max_attempts,
                backoff=lambda attempts: backoff.delay(max(attempts - 1, 0)),
            )  # fmt: skip
            if placement is not None:
                ledger.place(placement)  # (its offers are written with its row at `join`)
            ledger.join()
            return ledger
        except BaseException:
            if ledger is not None:
                ledger.close()
            db.close()
            raise

    return riding_out_a_lost_connection(opened, pause=1.0)


def riding_out_a_lost_connection(step: Callable[[], T], *, seconds: float = STARTUP_SECONDS,
                                 pause: float) -> T:  # fmt: skip
    """`step()` - statements safe to run again - tried again every `pause` seconds while the
    database does not answer, for `seconds` from now: a manager's start (`open_shared`, and
    `joining`'s last statements) rides out a connection lost meanwhile - a failover's
    `pg_terminate_backend` between its registration and its look at its drain ended a `--once`
    run with exit 3 before it took a single item. A refusal no wait mends (`LEDGER_ERROR`: a
    bug, a changed schema - said in full), and a fault that outlasts `seconds`, are raised."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return step()
        except StorageFault as fault:
            if time.monotonic() > deadline or fault.kind == LEDGER_ERROR:
                raise
            log.warning("%s; trying again", fault.short)
        time.sleep(pause)  # (a lost connection was dropped: the next try opens another)
