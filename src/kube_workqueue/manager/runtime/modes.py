"""How a manager shares its queue: alone, or as one of a fleet on a shared ledger.

The manager once asked "is the ledger shared?" at ten turns of its life - which line to take
items from, what counts against its parallelism, what a `--once` run waits for, what it lets go
of when it stops. Each answer is now a method of one mode object, chosen once by the assembly
(`mode_for`) and given to the `Manager`:

                          Alone (one manager per queue)     Fleet (`ports.ClaimsWork`)
    line                  its own dedup workqueue, fed by   the ledger's claims
                          its listings (`RateLimitingQueue`) (`claims.ClaimedLine`)
    others_running        the backend's work outside it     + the other managers' runs, once a
                                                            parallelism is asked of the queue
    waiting_is_listed     no: the line has what waits       yes: what waits is the ledger's
    start                 nothing                           the heartbeat (`claims.Heartbeat`)
    set_aside             nothing: the item is forgotten    parked out of every manager's line
    follower              none                              a `--once` run hears what other
                                                            managers end (`OthersFollower`)
    someone_else_runs     never                             a target running on another manager
    waits_out_faults      no: a fault ends a `--once` run   yes: its claims would run out, and
                                                            the items run again elsewhere
    orders_its_line       yes: priorities move items in it  no: the ledger orders the claims
    when_claims_lost      never                             its runs ended when its claims
                                                            were taken (declared dead)
    let_go                running items back to pending     its own claims only (work that
                                                            outlives it stays claimed)

Both lines satisfy one protocol, the dispatcher's (`Line`): client-go's duties (`add`,
`add_rate_limited`, `forget`, `done`, `get`, `shut_down`), `wait_for_key`, and
`has_waiting()` / `waiting_for_slot()` - questions that may be a round trip to the database,
named as such (a `len()` and a duck-typed `prefetch` hid them).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

from ..faults import StorageFault
from ..ports import Backend, ClaimsWork, Ledger, State
from ..workqueue import PrometheusMetricsProvider, RateLimitingQueue
from .claims import Heartbeat, claimed_line, others_running
from .others import OthersFollower


@runtime_checkable
@runtime_checkable
class WakesWaiters(Protocol):
    """A line whose waiters can be told to look again (the manager's own queue: what holds
    keys - a group's limit or rate - changed). A shared ledger's line asks the database at
    each wait, and needs no telling."""

    def poke(self) -> None: ...


class Line(Protocol):
    """What the dispatcher and the manager take items from and give them back to."""

    def add(self, name: str) -> None: ...
    def add_rate_limited(self, name: str) -> None: ...
    def forget(self, name: str) -> None: ...
    def done(self, name: str) -> None: ...
    def get(self) -> tuple[str, bool]: ...
    def wait_for_key(self) -> bool: ...
    def shut_down(self) -> None: ...

    def has_waiting(self) -> bool:
        """Whether an item waits: may ask the ledger (a round trip), never counts a line."""

    def waiting_for_slot(self) -> bool:
        """For a worker that holds a slot: whether an item waits for it (a line that claims
        its items claims it now, in the same round trip)."""


class Alone:
    """The only manager of its queue (see the module docstring)."""

    waiting_is_listed = False
    waits_out_faults = False
    orders_its_line = True  # priorities move items in its own line (`priorities`)

    def __init__(self, ledger: Ledger, backend: Backend) -> None:
        self.ledger = ledger
        self.backend = backend

    def others_running(self) -> Callable[[], int]:
        return self.backend.others_running

    def line(self, rate_limiter, registry, free_slots, on_fault, order=None) -> Line:
        """`order`: the line's ordering strategy (a grouped line for a queue with tenants:
        `manager.tenancy.line`), FIFO by default."""
        metrics = PrometheusMetricsProvider(registry) if registry else None
        return RateLimitingQueue("items", rate_limiter=rate_limiter, metrics_provider=metrics,
                                 order=order)  # fmt: skip

    def follower(self, needs_work) -> OthersFollower | None:
        return None

    def use_tenants(self, tenants) -> None:
        """The queue's groups and rules: alone, its own line holds them (`tenants.order`)."""

    def reads_needs_from(self, source) -> bool:
        """Whether items' needs come from their data (`--needs-from-data`): only a fleet's."""
        return False

    def when_claims_lost(self, told: Callable[[list[str]], None]) -> None:
        pass  # nobody takes its items from it

    def start(self, line: Line, stop, on_fault) -> None:
        pass

    def set_aside(self, line: Line, name: str) -> None:
        pass  # forgotten: the next listing that says it needs work brings it back

    def someone_else_runs(self, name: str) -> bool:
        return False

    def let_go(self) -> None:
        """Never leave an item marked running: each back to pending, its attempt uncounted."""
        for row in self.ledger.rows(State.RUNNING):
            self.ledger.requeue(row.name)


class Fleet(Alone):
    """One of the managers of a shared ledger (see the module docstring)."""

    waiting_is_listed = True
    waits_out_faults = True
    orders_its_line = False  # the ledger orders the claims by the priorities it recorded
    ledger: ClaimsWork

    def others_running(self) -> Callable[[], int]:
        return others_running(self.backend, self.ledger)

    def line(self, rate_limiter, registry, free_slots, on_fault, order=None) -> Line:
        """(`order` is the ledger's: its claims choose, and count the groups' limits.)"""
        return claimed_line(self.ledger, rate_limiter, registry, free_slots=free_slots,
                            on_fault=on_fault)  # fmt: skip

    def follower(self, needs_work) -> OthersFollower:
        return OthersFollower(self.ledger, needs_work)

    def use_tenants(self, tenants) -> None:
        """The ledger's claims hold the groups' rules, for every manager together."""
        self.ledger.use_tenants(tenants)

    def reads_needs_from(self, source) -> bool:
        """With `--needs-from-data`: the ledger reads each new item's `needs` from `source` as
        it records it (`fleet.placed`), and says so."""
        return self.ledger.read_needs_from(source)

    def when_claims_lost(self, told: Callable[[list[str]], None]) -> None:
        """`told(names)` when this manager was declared dead while they ran (its claims were
        taken: the runs are ended here, their outcomes not ours to record)."""
        self.ledger.on_claims_lost = told

    def start(self, line: Line, stop, on_fault: Callable[[StorageFault], None]) -> None:
        Heartbeat(self.ledger, line, stop, on_fault).start()

    def set_aside(self, line: Line, name: str) -> None:
        # out of every manager's line until a listing says it needs work again (a claim is
        # read fresh: a skipped one needs none - out of attempts, say)
        line.park(name)

    def someone_else_runs(self, name: str) -> bool:
        # another manager's run: its end is heard from the ledger - or, if that manager dies,
        # it is back in the line and may run here
        return (self.ledger.state(name) or ("",))[0] == State.RUNNING

    def let_go(self) -> None:
        """Only its own claims: the other managers' items run on (a cluster's Jobs run on
        too: the installation's next manager adopts them)."""
        self.ledger.release_mine(keep_running=self.backend.work_outlives_manager)


def mode_for(ledger: Ledger, backend: Backend) -> Alone:
    """The mode a manager on `ledger` works in: a fleet when the ledger claims work."""
    return Fleet(ledger, backend) if isinstance(ledger, ClaimsWork) else Alone(ledger, backend)
