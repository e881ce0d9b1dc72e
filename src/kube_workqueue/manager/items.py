"""The item model: what every part of the manager says of an item, and nothing of the world.

    State, FINISHED    an item's states, and those its work has ended in (the transitions
                       between them, and their guards, are `lifecycle.py`'s)
    pair, PENDING_PAIR (state, attempts) as one shared tuple per value: a million items in a
                       ledger's memory share a handful
    Row                what a ledger knows of one item
    Outcome            how one unit of work ended
    Cancel             the ask to end one run whose item left the source
    valid_priority, keep_priority
                       a priority a source gave, checked; a map that keeps only those not 0
    QueueRecord        what a backend's record says of a queue's items, for `status`

The ports (`ports.py`: what the core needs from sources, ledgers, backends) speak in these
terms and re-export them, so `from manager.ports import State` reads as it always did.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum


class State(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"  # it left the source before its work was done (--cancel-removed)


# The states an item's work has ended in: what `Ledger.rerun` starts over from.
FINISHED = (State.SUCCEEDED, State.FAILED, State.CANCELLED)

_PAIRS: dict[tuple[str, int], tuple[str, int]] = {}


def pair(state: str, attempts: int) -> tuple[str, int]:
    """(state, attempts), one shared tuple per value: a ledger keeps one per item in memory,
    and a million pending items then share one tuple instead of holding 56 bytes each."""
    return _PAIRS.setdefault((state, attempts), (state, attempts))


PENDING_PAIR = pair(State.PENDING.value, 0)


@dataclass(frozen=True)
class Row:
    """What a ledger knows of one item. Times are wall-clock seconds; `started`/`finished` are
    those of the latest attempt."""

    name: str
    state: str
    attempts: int
    first_seen: float
    started: float | None
    finished: float | None
    exit_code: int | None
    log_path: str | None
    last_error: str | None
    version: str | None = None  # the item's version its latest attempt ran at
    priority: int = 0  # higher starts first (`manager.workqueue.ordering`)


@dataclass(frozen=True)
class Outcome:
    """How one unit of work ended. `interrupted` means the manager ended it (shut-down): the
    item is not failed and runs again."""

    succeeded: bool
    exit_code: int | None = None
    error: str | None = None
    interrupted: bool = False
    log_path: str | None = None
    seconds: float | None = None  # how long it ran (the backend's measure, else the reconciler's)
    final: bool = False  # a failure no retry fixes: the item stays failed
    cancelled: bool = False  # ended because the item left the source (`Backend.cancel`)
    # interrupted here, but the work runs on without this manager (a cluster's Job when its
    # manager stops): on a shared ledger the claim stays, for the installation's next manager
    outlives: bool = False


class Cancel:
    """Whether one run was asked to end because its item left the source (`--cancel-removed`).
    The manager makes one per run when it records the start, and sets it at most once
    (`manager.runtime.cancellation`); the backend that runs the item only reads it.

    A backend's duty: look at `is_set()` before it starts anything for the item, and end what
    it started when told (`on_set`); its `run` then returns `Outcome(cancelled=True)`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._set = False  # Invariant: once True, never False; _callbacks is then empty
        self._callbacks: list[Callable[[], None]] = []

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        """Ask the run to end; every `on_set` callback is called once, in this thread."""
        with self._lock:
            if self._set:
                return
            self._set = True
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()

    def on_set(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call `callback()` when the run is asked to end - at once if it was already. Returns
        a function that forgets the callback (call it when what it would end is over)."""
        with self._lock:
            if not self._set:
                self._callbacks.append(callback)
                return lambda: self._forget(callback)
        callback()
        return lambda: None

    def _forget(self, callback: Callable[[], None]) -> None:
        with self._lock:
            if callback in self._callbacks:
                self._callbacks.remove(callback)


PRIORITY_LIMIT = 2**31 - 1  # priorities are 32-bit integers (Kubernetes' PriorityClass range)


def valid_priority(value: object) -> int | None:
    """A priority a source gave, or None when it is not one (bools, floats with a fraction,
    strings, numbers out of range)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and abs(value) <= PRIORITY_LIMIT:
        return value
    return None


def keep_priority(kept: dict[str, int], name: str, priority: int | None) -> None:
    """Note `name`'s priority in `kept`, a map that holds only priorities other than 0 (the
    default: a million unranked items cost nothing). None counts as 0."""
    if priority:
        kept[name] = priority
    else:
        kept.pop(name, None)


@dataclass
class QueueRecord:
    """What a backend's record says of a queue, for `workqueue status` (which turns it into a
    `manager.views.queue_view.QueueView`): every item it can name, the facts the running manager
    left (`Ledger.note_manager`; None when none runs), reasons it knows better than the rows
    (a pod waiting for a node), what `status NAME` adds per item (a pod's state), and items it
    can count but not name (a record keyed by hash)."""

    where: str
    rows: list[Row]
    facts: dict | None = None
    reasons: dict[str, str] = field(default_factory=dict)
    details: dict[str, dict] = field(default_factory=dict)
    unnamed: dict[str, int] = field(default_factory=dict)  # state -> count
    paused_since: float | None = None  # `workqueue pause`
    # False when the rows' first-seen times are not arrivals (Kubernetes: a Job's creation is
    # its dispatch); then no arrival rate is measured from them.
    arrivals_known: bool = True
    held: str | None = None  # why the running manager holds dispatch (`manager.faults`)
    # False when what is running stops with its manager (local processes): a running row with
    # no manager is what a stopped manager left, and runs again when one starts.
    work_outlives_manager: bool = True
    # a shared ledger's managers whose heartbeat is late: {id, heard_seconds, lease_seconds}
    silent_managers: list[dict] = field(default_factory=list)
    # a shared ledger's managers asked to drain: {id, since_seconds, holding}
    draining_managers: list[dict] = field(default_factory=list)
    # a shared ledger's live managers that offer anything (`--offers`): id -> {key: value}
    manager_offers: dict[str, dict] = field(default_factory=dict)
