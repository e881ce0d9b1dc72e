"""The ports: what the manager core needs from the world, declared once (the item model they
speak of is `items.py`, re-exported here).

The core (poller, reconciler, runner, autoscaler) is written against these names only. A source
client, a ledger and a backend are whatever satisfies the `typing.Protocol`s below; the local
backend (a process per item, a SQLite ledger) and the Kubernetes backend (a Job per item, a
record in ConfigMaps) are two such sets, each in its own package under `manager/backends/`;
either backend may instead share one PostgreSQL ledger with other managers (the fleet's,
`manager/fleet/`), which satisfies the same ports.

An item's life, the same on every backend (state strings, rq's habit):

    pending ──start()──► running ──finish()──► succeeded | failed
       ▲                    │
       └────requeue()───────┘  (the manager stopped it: the attempt does not count)

    pending | running | failed ──cancel()──► cancelled  (it left the source: --cancel-removed)

A failed item with attempts left is retried after a per-item backoff (`manager.retry`); out of
attempts it stays failed until someone asks for a re-run. A cancelled item is finished too: it
runs again only when asked (`workqueue retry`) or, under `--on-change rerun`, when it comes
back at another version.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any, Protocol, runtime_checkable

from .items import (  # noqa: F401  (the item model, re-exported: the ports speak of it)
    FINISHED,
    PENDING_PAIR,
    PRIORITY_LIMIT,
    Cancel,
    Outcome,
    Row,
    State,
    keep_priority,
    pair,
    valid_priority,
)
from .source_ports import (  # noqa: F401  (the source's ports, re-exported)
    AnswersBy,
    GroupsItems,
    RanksItems,
    SettlesItems,
    Source,
    SourceError,
    SourceProtocolError,
    SourceUnavailable,
    TellsLog,
    TellsRetention,
    WatchUnsupported,
)


class ItemLedger(Protocol):
    """The record of every item, its life: what the reconciler reads before it acts, and writes
    before the manager acts on a transition. `where` names it for people (a folder, a
    namespace)."""

    where: str
    # False when the rows' first-seen times are not arrivals (see `QueueRecord`).
    arrivals_known: bool

    def state(self, name: str) -> tuple[str, int] | None:
        """(state, attempts), or None for an item never seen. Called for every listed name on
        every poll: it must be cheap (a dict lookup, not a query)."""

    def see(self, names: Iterable[str]) -> list[str]:
        """Record names not seen before as pending; return the new ones."""

    def priority(self, name: str) -> int:
        """The priority last recorded for `name` (0 when none was). Asked for every waiting
        item the line places: a dict lookup."""

    def prioritize(self, changes: dict[str, int]) -> None:
        """Record priorities of known items (name -> priority), where `status` reads them."""

    def start(self, name: str, log_path: str, version: str | None = None) -> int:
        """pending/failed -> running; count the attempt and return its number; note the
        item's `version` (from its data) as the one this attempt runs at."""

    def version_ran(self, name: str) -> str | None:
        """The version the item's latest attempt ran at; None when not known. Cheap."""

    def rerun(self, name: str, version: str) -> bool:
        """A finished item whose version changed runs again (`--on-change rerun`): the old
        outcome kept in its history, a new attempt series. False unless it had finished."""

    def finish(self, name: str, succeeded: bool, exit_code: int | None, error: str | None):
        """running -> succeeded | failed."""

    def requeue(self, name: str) -> None:
        """running -> pending without counting the attempt."""

    def cancel(self, name: str) -> bool:
        """pending, running or failed -> cancelled (the item left the source). False when it
        had already finished (succeeded, cancelled) or is unknown: nothing changed."""

    def take_retry_requests(self) -> list[str]:
        """Re-runs asked for from outside (`workqueue retry`) since the last call, applied:
        the names now pending again."""

    def gave_up(self, name: str) -> bool:
        """True when a failed item failed in a way no retry fixes (an exit code the user
        listed as final), whatever attempts are left. Asked only of failed items; cheap."""

    def row(self, name: str) -> Row | None: ...

    def rows(self, state: str | None = None) -> list[Row]:
        """Every known item, or those in `state`, by name."""

    def counts(self) -> dict[str, int]:
        """Items by state, every state present (0 when none)."""

    def probe(self) -> None:
        """After a `manager.faults.StorageFault`: return when the record takes writes again,
        raise the fault while it does not. Called every few seconds while dispatch is held."""

    def close(self) -> None: ...


class QueueControls(Protocol):
    """What is asked of the queue as a whole, and what it tells back: a pause, a parallelism,
    group rules, a hold of removals (asked by `workqueue pause`, `scale`, `resume`, a
    WorkQueue's spec, the autoscaler), and the status and the running manager's facts it
    reports (`manager.runtime.asked` follows them). Stored with the queue, so every manager
    and a restarted one obey them. One implementation per store, the only thing both the
    manager and the queue commands (`manager.queue_ops`) talk to about them."""

    # False when `report` writes nothing (whoever shows the queue reads the ledger itself):
    # the manager then never builds the status, a view over every item, for it.
    keeps_status: bool

    def paused_since(self) -> float | None:
        """When the queue was paused (`workqueue pause`), or None: nothing new may start while
        it is. Stored with the queue, so every manager and a restarted one obey it. Called
        about once a second: cheap."""

    def set_paused(self, since: float | None) -> None:
        """Pause the queue as of `since` (`workqueue pause`), or resume it (None)."""

    def accept_removals(self) -> None:
        """Accept, as of now, the removals the queue's manager holds (`workqueue resume
        --accept-removals`): `removals_accepted` says a later time from then on."""

    def removals_accepted(self) -> float | None:
        """When someone last accepted removals the manager holds (`workqueue resume
        --accept-removals`), or None: a later time than the manager has seen makes it act on
        them at once (`manager.runtime.removal_guard`)."""

    def removals_held_since(self) -> float | None:
        """When the hold of a mass removal began (`manager.runtime.removal_guard`), or None:
        recorded with the queue so a manager that starts holds on (or acts, once its time has
        passed). Read once, at a manager's start."""

    def hold_removals(self, since: float | None) -> None:
        """Record that a hold of removals began at `since` (None: it ended)."""

    def wanted_parallelism(self) -> int | None:
        """The parallelism asked for where every manager of the queue sees it (`workqueue
        scale`; on Kubernetes the WorkQueue's `spec.parallelism`, set by a person, an HPA or
        KEDA through `/scale`), or None when nobody asked. 0: nothing new starts. Called about
        twice a second: cheap (a file, a watched cache)."""

    def want_parallelism(self, parallelism: int) -> None:
        """Ask for `parallelism` there (the built-in autoscaler's decisions, so that what the
        queue's object says is what runs)."""

    def wanted_group_rules(self) -> dict | None:
        """The group limits and rates asked of the queue (`workqueue scale --limit/--rate`;
        on Kubernetes the WorkQueue's `spec.limits` and `spec.rates`) as
        `manager.tenancy.rules.asked_rules` reads them, or None. Called about twice a
        second: cheap."""

    def want_group_rules(self, rules: dict) -> None:
        """Ask for `rules` (`{"limits": [...], "rates": [...]}`, each as the flags write
        it; a kind left out keeps what was asked of it)."""

    def report(self, status: dict) -> None:
        """The queue as its manager sees it now (`runtime.asked.Asked.status_report`), for
        whoever shows the queue (the WorkQueue's `status`). Called every few seconds; the
        ledger decides whether anything is written."""

    def note_manager(self, facts: dict | None) -> None:
        """Leave `facts` of the manager running the queue (parallelism in force, retry policy;
        see `Asked.facts`) where `workqueue status` reads the queue's record, so it can say
        when waiting items will run; None when the manager stops. Called at start and when the
        parallelism changes, never per item."""


class Ledger(ItemLedger, QueueControls, Protocol):
    """A queue's record as a manager holds it: the item's life and the queue's controls, one
    object per store (the SQLite ledger with the files beside it, the shared PostgreSQL
    ledger with its settings row, the cluster's record with its WorkQueue or control
    ConfigMap). The manager's collaborators each name the half they use; the ledger contract
    holds every store to both (`tests/ledger_contract/`: `Transitions`, `FollowsTheModel`,
    `Controls`)."""


class Backend(Protocol):
    """Runs one unit of work per item. Called from reconciler worker threads, each holding a
    capacity slot; `run` returns when the unit of work has ended."""

    # whether what runs goes on when its manager stops (a cluster's Jobs: the next manager
    # adopts them) - a stopping manager on a shared ledger then keeps those claims
    work_outlives_manager: bool

    def log_path(self, name: str) -> str:
        """Where a person finds the item's output (a file, or how to ask the cluster)."""

    def run(self, name: str, data: dict[str, Any], attempt: int, cancel: Cancel) -> Outcome:
        """Run one unit of work for the item and return how it ended. `cancel` is this run's
        (see `Cancel`): set before anything started, nothing starts; set later, the work is
        ended and the outcome is `cancelled`."""

    def shutdown(self, grace: float) -> None:
        """Start nothing new; running work gets `grace` seconds, then ends as `interrupted`
        (or, on a cluster, runs on and is recorded by whoever manages the queue next)."""

    def others_running(self) -> int:
        """Units of work of this queue running outside this manager (a rival manager's, or
        from before a restart): they count against the parallelism too. 0 for most."""

    def on_change(self, callback: Callable[[], None]) -> None:
        """Call `callback` whenever `others_running()` may have changed."""

    # A backend that may run several items as one unit is also a `RunsBatches` (below).

    def cancel_elsewhere(self, name: str) -> bool:
        """End the unit of work of `name` (it left the source) that runs outside this manager:
        on a cluster, a Job another manager (or this one before a restart) left running. True
        when it was ended; False when none runs (a local backend's work never outlives its
        manager). Work this manager runs is ended through its run's `Cancel`."""


@runtime_checkable
class RunsBatches(Protocol):
    """A backend that can run several items as one unit (Kubernetes: an Indexed Job); it does
    when its `batch_size` > 1, and the dispatcher then forms batches from the head of the line
    (`manager.runtime.batching`). Otherwise it runs one item per unit, as every backend can."""

    batch_size: int  # the most items in one unit
    batch_bytes: int  # what one unit's items may take together
    batch_wait: float  # seconds the dispatcher may wait to fill a unit

    def item_bytes(self, name: str, data: dict[str, Any], attempt: int) -> int:
        """What one item takes of `batch_bytes`."""

    def run_batch(self, runs: list, report: Callable[[Any, Outcome], None]) -> None:
        """Run `runs` (each with name, data, attempt, cancel) as one unit; `report(run,
        outcome)` once per run, as each ends."""


@runtime_checkable
class SaysWhenAsked(Protocol):
    """A ledger that can say when what is asked of its queue may have changed (a WorkQueue's
    watch): `Asked.follow` then looks on each change, not on a timer."""

    asked_changed: threading.Event | None  # set on each change; None: it cannot say here


@runtime_checkable
class KeepsLiveRows(Protocol):
    """A ledger of a queue that may know a million finished items (the cluster's record): the
    status report builds its view from these rows and counts the rest, instead of building a
    row for every item (`manager.runtime.asked`)."""

    def live_rows(self) -> list[Row]:
        """The rows of items run by this manager and of those still pending or running (the
        rest are counted by `Ledger.counts`)."""


@runtime_checkable
class AdoptsWork(Protocol):
    """A backend whose work outlives its manager and can be waited for by the next one (the
    local backend's keepers, Kubernetes' running Jobs): what a manager that died left running,
    by (name, attempt). The new manager waits for each with `run(name, data, attempt, cancel)`
    instead of starting it (`manager.runtime.adoption`): `data` is {} unless the backend says
    `adopted_needs_data`, then the item as the source has it now ({} if it left)."""

    adopted_needs_data: bool

    def adopted(self) -> list[tuple[str, int]]: ...


class ClaimLost(Exception):
    """A manager's claim on an item is gone (other managers declared it dead and took its
    claims): nothing of the item is written by the manager that lost it."""


# what `ClaimsWork.needs_left` says an item needs when it needs nothing, but the manager asking
# was asked to drain (`workqueue drain`): only another manager may run it
DRAINED = "(a manager that is not drained)"


@runtime_checkable
class ClaimsWork(Protocol):
    """A ledger many managers share (`manager.fleet`): a manager takes from the line only
    what it claimed, never more than its free slots, and a claim lives while its manager's
    heartbeat does - when it stops, the other managers give the claim back to the line. The
    manager then feeds its dispatcher from claims (`manager.runtime.claims.ClaimedLine`)
    instead of its own listing; its writes of a run are fenced on the claim and the attempt (a
    lost one raises `ClaimLost` at `start`, `finish` and the cancel of a run, and is counted;
    a requeue of it writes nothing)."""

    lease: float  # seconds a claim outlives its manager's last heartbeat
    owner: str  # this manager's name in the claims
    # told the runs of this manager whose claims were taken (it was declared dead): end them
    on_claims_lost: Callable[[list[str]], None] | None

    def claim(self, limit: int) -> list[str]:
        """Up to `limit` items from the head of the line, now this manager's (one statement)."""

    def use_tenants(self, tenants) -> None:
        """Claim under the groups' limits, rates and fair share of `tenants` (the manager's
        `manager.runtime.tenants.Tenants`), counted across every manager."""

    def claim_with_finishes(self, wanted: Callable[[], int],
                            took: Callable[[list[str]], None]) -> None:  # fmt: skip
        """From now on a finish may claim in its own statement: `wanted()`, asked in the
        finishing thread, says how many items (0: none); `took(names)` is told what it took
        (perhaps nothing; not told when the finish claimed nothing or failed)."""

    def waiting(self) -> bool:
        """Whether any item is free to claim now (one cheap query)."""

    def holds(self, name: str) -> bool:
        """Whether this manager holds a claim on `name` that has not started."""

    def holding(self) -> int:
        """How many items this manager holds now (claimed, or running here)."""

    def release(self, name: str, *, ready_in: float = 0.0, park: bool = False) -> None:
        """Let go of a claim that did not start: claimable again after `ready_in` seconds,
        or (`park`) not until a listing brings the item again (`unpark`)."""

    def parked(self, name: str) -> bool: ...

    def unpark(self, names: list[str]) -> None: ...

    def refresh(self) -> None:
        """Read what other managers changed since the last look (`state` answers from it)."""

    def others_running(self) -> int:
        """Items the other managers run now (cheap: read at most twice a second)."""

    def heartbeat_round(self) -> list[tuple[str, str]]:
        """One round of the heartbeat's thread: beat when due, look at the other managers
        and let go of the items of those found dead ((item, owner) of each), settle writes
        whose answer was lost. A `StorageFault` when the database does not take it."""

    def on_line_changed(self, callback: Callable[[str], None]) -> None:
        """Call `callback(payload)` (from another thread) when items may have become
        claimable; `payload` is for `first_to_answer`."""

    def first_to_answer(self, payload: str) -> bool:
        """Whether this manager answers the notification with `payload` at once (the others
        a moment later: not every manager racing for one new item)."""

    def claim_counters(self) -> dict[str, float]:
        """claims, refused, lost, expired, done: what this manager's claims met so far."""

    def read_needs_from(self, source) -> bool:
        """With `--needs-from-data`: read each new item's `needs` from `source` (its `peek`,
        else `get_item`) as it is recorded; whether it will."""

    def unmet_needs(self) -> dict[str, int]:
        """need -> how many items wait with it while no live manager offers what it needs
        (`manager.placement`; a few seconds old at most)."""

    def needs_left(self, names: list[str]) -> dict[str, tuple[str, str]]:
        """Of `names`, each that waits with a need or runs elsewhere: (the need, who will run
        it: "none" - no live manager, "me" - this one, "others" - another live one; ("",
        "running") - another manager holds it; (DRAINED, ...) - one that needs nothing, of a
        manager asked to drain). A `StorageFault` when the database does not answer."""

    def release_mine(self, *, keep_running: bool = False) -> None:
        """A stopping manager: its running items back to pending (their attempts not
        counted) unless `keep_running` (its work runs on: a cluster's Jobs), its other
        claims let go; holding nothing, it leaves."""


class Elector(Protocol):
    """One manager per queue leads (a Kubernetes Lease); the others stand by."""

    lease_name: str

    def start(self) -> Elector: ...

    def wait_leading(self, stop: Callable[[], bool]) -> bool:
        """Block until this manager leads (True) or `stop()` says to give up (False)."""

    def on_lost(self, callback: Callable[[], None]) -> None:
        """Call `callback` once if leadership is lost after it was gained."""

    def stop(self) -> None:
        """Stop campaigning and renewing."""
