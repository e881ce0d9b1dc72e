"""The ledger view of the Kubernetes backend: what the reconciler reads, over the cluster.

`ClusterLedger` satisfies `manager.ports.Ledger`. An item's state is read from, in order:

  1. its current Job in the cache - of the version this manager wants (the one it started, or a
     re-run asked for), else the newest of the item's Jobs - while it runs, or once finished
     if the record does not know that attempt yet (a finished Job not yet recorded);
  2. the durable record (record.py), which has the later word on a finished attempt: it says
     cancelled, or pending for a re-run, after the Job's outcome (a re-run's own Job, finished
     and not yet recorded, then reads pending for a moment: its `run` is still waiting for
     the record, so nothing dispatches it twice);
  3. what this manager itself is doing with it; else pending if it has seen it listed.

Versions (`--on-change rerun`): the record keeps the version each outcome was for; `rerun`
moves the outcome into the item's history and marks it pending at the new version, so the old
version's Job (kept by the history limits, named by its own version) is history, not state.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Iterable
from typing import Protocol, runtime_checkable

from ....lifecycle import given_back, keep_version, may_cancel, may_rerun
from ....ports import FINISHED, State, keep_priority, pair
from ..client.cache import ClusterCache, finished
from ..manifests import batch_objects as bo
from ..manifests import objects as ko
from .batch_record import BatchRecords
from .queue_wide import ClusterQueueWide
from .record import ManagerFacts, RecordStore

FAIL_FAST = "PodFailurePolicy"  # the Failed condition's reason when a FailJob rule matched
# Rows of items finished here kept for the forecast's service times and reports: the newest.
RECENT_ROWS = 10_000
_ROW_FIELDS = ("first_seen", "started", "finished", "exit_code", "log_path", "last_error")
_EXIT_CODE, _LAST_ERROR = _ROW_FIELDS.index("exit_code"), _ROW_FIELDS.index("last_error")
_NEVER_STARTED = pair(State.PENDING.value, 0)  # (one shared pair: a million pending share it)


def _row_of(kept: tuple) -> dict:
    """A row kept as a tuple of _ROW_FIELDS, as the dict of an item run here."""
    return dict(zip(_ROW_FIELDS, kept, strict=True))


def failed_fast(job: dict) -> bool:
    """The Job failed by its podFailurePolicy's FailJob rule (--fail-fast-exit-codes)."""
    return any(
        c.get("type") == "Failed" and c.get("status") == "True" and c.get("reason") == FAIL_FAST
        for c in (job.get("status") or {}).get("conditions") or []
    )


def job_state(job: dict) -> tuple[str, int]:
    attempts = ko.job_attempt(job)
    outcome = finished(job)
    if outcome == "Complete":
        return State.SUCCEEDED.value, attempts
    if outcome == "Failed":
        return State.FAILED.value, attempts
    return State.RUNNING.value, attempts


@runtime_checkable
class FollowedControl(Protocol):
    """A queue's control whose every change is heard (its WorkQueue, watched: `changed` is set
    on each); a control ConfigMap, read when asked, is not one."""

    changed: threading.Event


class ClusterLedger(ClusterQueueWide):
    """`manager.ports.Ledger` over the cluster (see the module docstring)."""

    arrivals_known = False  # rows of items from the record carry no arrival time

    def __init__(
        self,
        queue: str,
        cache: ClusterCache,
        record: RecordStore,
        *,
        namespace: str = "",
        facts: ManagerFacts | None = None,
        control=None,
        batches: BatchRecords | None = None,
    ) -> None:
        self.queue = queue
        self.where = f"namespace {namespace}, queue {queue}" if namespace else f"queue {queue}"
        self.cache = cache
        self.record = record
        self._lock = threading.Lock()
        self._local: dict[str, tuple[str, int]] = {}
        # name -> when first seen: every name of one listing shares its one float, so a
        # million names cost a dict slot each. `_rows` holds the rows of items started here
        # and not finished (at most the parallelism); at its end a row moves to `_recent` as a
        # tuple of _ROW_FIELDS, of which only the newest RECENT_ROWS are kept (and as many
        # of those that failed, in `_failures`: a run's summary names its failures) - the
        # record holds every outcome, so a million items run here cost no million rows.
        # Invariant: every name in `_rows`, `_recent` or `_failures` is in `_seen`; a name is
        # in at most one of the three.
        self._seen: dict[str, float] = {}
        self._rows: dict[str, dict] = {}
        self._recent: OrderedDict[str, tuple] = OrderedDict()
        self._failures: OrderedDict[str, tuple] = OrderedDict()
        self._log_path = ""  # the last log path (a batch's is every member's: kept once)
        # name -> the version this manager started the item at, or asked a re-run for
        # (None: started without one, after an older version)
        self._versions: dict[str, str | None] = {}
        # name -> its priority, for items whose priority is not 0 (what this manager was told:
        # `status` is this manager's own report, so the line's order need not be written)
        self._priorities: dict[str, int] = {}
        self.facts = facts  # where `note_manager` leaves the manager's facts (None: nowhere)
        # what is asked of the queue - pause, parallelism - and where its status goes: its
        # WorkQueue (queue_resource.QueueResource) or, without the CRD, its control ConfigMap
        self.control = control
        # set on every change of the queue's WorkQueue, where one is followed (`Asked.follow`)
        followed = isinstance(control, FollowedControl)
        self.asked_changed = control.changed if followed else None
        self.batches = batches  # the record of batches: it speaks first for their members

    def _batch_state(self, name: str, key: str) -> tuple[str, int] | None:
        """What the newest batch holding `name` says (None: no batch holds it). A member
        whose batch is not recorded yet: what this manager saw it end as, else what the
        batch's Job says of its index, else running."""
        found = self.batches.lookup(key) if self.batches is not None else None
        if found is None:
            return None
        if found.state != State.RUNNING.value:
            return found.state, found.attempts
        with self._lock:
            local = self._local.get(name)
        if local is not None and local[0] in FINISHED:
            return local
        job = self.cache.get(bo.batch_name(self.queue, found.seq))
        if job is not None:
            status = job.get("status") or {}
            if found.index in bo.parse_indexes(status.get("completedIndexes")):
                return State.SUCCEEDED.value, found.attempts
            if found.index in bo.parse_indexes(status.get("failedIndexes")):
                return State.FAILED.value, found.attempts
        return State.RUNNING.value, found.attempts

    def _hash(self, name: str) -> str:
        """The item's key in the record, the batches and its Jobs' label (a SHA-256: found
        once a public call and handed to the helpers - a million new names are looked up in
        `see` and again in `state`, and each hash costs a microsecond)."""
        return ko.item_hash(self.queue, name)

    def _job(self, name: str, key: str) -> dict | None:
        """The item's current Job in the cache (see the module docstring), or None."""
        jobs = [j for j in self.cache.indexed(key) if not j["metadata"].get("deletionTimestamp")]
        if not jobs:
            return None
        with self._lock:
            wanted = self._versions.get(name)
        if wanted is None:
            wanted = self.record.version(key)
        return ko.current_job(jobs, wanted)

    def state(self, name: str) -> tuple[str, int] | None:
        """See the module docstring for which source of truth answers."""
        key = self._hash(name)
        batched = self._batch_state(name, key)
        if batched is not None:
            return batched
        return self._unbatched_state(name, key)

    def _unbatched_state(self, name: str, key: str) -> tuple[str, int] | None:
        """`state` for a name no batch holds: its Job, this manager's word, the record."""
        recorded = self.record.get(key)
        job = self._job(name, key)
        if job is not None:
            current = job_state(job)
            if current[0] == State.RUNNING.value or recorded is None:
                return current
            if recorded[0] == State.PENDING.value:  # a re-run asked for after it finished
                return recorded
            if recorded[1] < current[1]:  # finished, not yet recorded
                return current
            return recorded  # the record knows this attempt, and may say more since
        with self._lock:
            local = self._local.get(name)
        if local is not None and local[0] == State.RUNNING.value:
            return local
        if (local is not None and local[0] == State.PENDING.value and recorded is not None
                and recorded[0] == State.FAILED.value and local[1] >= recorded[1]):  # fmt: skip
            return local  # a retry of a recorded failure, put back in line (`requeue`)
        if recorded is not None:
            return recorded
        if local is None and name in self._seen:  # seen, never started: pending
            return _NEVER_STARTED
        return local

    def see(self, names: Iterable[str]) -> list[str]:
        """Names not seen before, noted with one shared time. A name a recorded batch holds
        as finished (from an earlier run) is known already: its batch speaks for it, and it
        costs this manager nothing (a million finished items are not a million rows). A name
        the record or a Job knows is noted but not new: a restarted manager's first listing
        is not a burst of arrivals (the autoscaler counts them; the contract suite found it)."""
        now = time.time()
        new = []
        with self._lock:
            unseen = [name for name in names if name not in self._seen]
        for name in unseen:
            key = self._hash(name)
            batched = self._batch_state(name, key)  # (None without batches)
            if batched is not None and batched[0] in FINISHED:
                continue
            # in a batch, recorded, or its Job is here: it ran before (the batch looked up once)
            known = batched is not None or self._unbatched_state(name, key) is not None
            with self._lock:
                if name not in self._seen:
                    self._seen[name] = now
                    if not known:
                        new.append(name)
        return new

    def priority(self, name: str) -> int:
        """The priority last noted for `name` (0 when none was)."""
        return self._priorities.get(name, 0)

    def prioritize(self, changes: dict[str, int]) -> None:
        """Note the priorities of items (name -> priority)."""
        with self._lock:
            for name, priority in changes.items():
                keep_priority(self._priorities, name, priority)

    def _row_data(self, name: str) -> dict:
        """The row of an item run here (the caller holds `_lock`)."""
        row = self._rows.get(name)
        if row is None:
            recent = self._recent.pop(name, None) or self._failures.pop(name, None)
            if recent is not None:
                row = self._rows[name] = _row_of(recent)
            else:
                now = time.time()
                row = self._rows[name] = {"first_seen": self._seen.setdefault(name, now)}
        return row

    def _ended(self, name: str) -> None:
        """The row of `name`, run here, is complete: kept among the recent (caller: `_lock`)."""
        row = self._rows.pop(name)
        self._recent[name] = tuple(row.get(field) for field in _ROW_FIELDS)
        while len(self._recent) > RECENT_ROWS:
            old, kept = self._recent.popitem(last=False)
            if kept[_LAST_ERROR] or kept[_EXIT_CODE]:
                self._failures[old] = kept
                if len(self._failures) > RECENT_ROWS:
                    self._failures.popitem(last=False)

    def _ended_row(self, name: str) -> dict | None:
        """The kept row of an item that ended here, as a dict (the caller holds `_lock`)."""
        kept = self._recent.get(name) or self._failures.get(name)
        return None if kept is None else _row_of(kept)

    def start(self, name: str, log_path: str, version: str | None = None) -> int:
        current = self.state(name)
        attempts = (current[1] if current else 0) + 1
        with self._lock:
            # not `keep_version`: this map sits in front of the Job's and the record's versions
            # (`version_ran`), so a start at no version is held as None, never popped - a pop
            # would let an older version answer for this run
            if version is not None or name in self._versions:
                self._versions[name] = version
            self._local[name] = pair(State.RUNNING.value, attempts)
            if log_path == self._log_path:
                log_path = self._log_path
            self._log_path = log_path
            row = self._row_data(name)
            row.update(started=time.time(), finished=None, log_path=log_path)
        return attempts

    def finish(self, name: str, succeeded: bool, exit_code: int | None, error: str | None):
        state = State.SUCCEEDED if succeeded else State.FAILED
        with self._lock:
            attempts = self._local.get(name, (None, 1))[1]
            self._local[name] = pair(state.value, attempts)
            self._row_data(name).update(finished=time.time(), exit_code=exit_code, last_error=error)
            self._ended(name)

    def requeue(self, name: str) -> None:
        with self._lock:
            attempts = self._local.get(name, (None, 1))[1]
            self._local[name] = pair(State.PENDING.value, given_back(attempts))

    def cancel(self, name: str) -> bool:
        """Recorded cancelled in the durable record (so no manager runs it again), unless it
        had finished. A pending item never seen running has 0 attempts."""
        current = self.state(name)
        if not may_cancel(current):
            return False
        if self.batches is not None and self.batches.amend(self._hash(name), "cancelled"):
            self._cancelled_here(name, current[1])
            return True  # a failed member of a recorded batch: its batch's record says so
        version = self.version_ran(name)
        self.record.put(self._hash(name), State.CANCELLED.value, current[1], version=version)
        self._cancelled_here(name, current[1])
        return True

    def _cancelled_here(self, name: str, attempts: int) -> None:
        with self._lock:
            self._local[name] = pair(State.CANCELLED.value, attempts)
            self._row_data(name).update(
                finished=time.time(), last_error="cancelled: it left the source"
            )
            self._ended(name)

    def take_retry_requests(self) -> list[str]:
        return []  # `workqueue retry` acts on the cluster directly: nothing is left for us

    def version_ran(self, name: str) -> str | None:
        """The version this manager started the item at (or asked a re-run for), else its
        current Job's, else the record's. Cache and dict lookups."""
        with self._lock:
            if name in self._versions:
                return self._versions[name]
        key = self._hash(name)
        found = self.batches.lookup(key) if self.batches is not None else None
        if found is not None:
            return found.version
        job = self._job(name, key)
        if job is not None and ko.job_version(job) is not None:
            return ko.job_version(job)
        return self.record.version(key)

    def rerun(self, name: str, version: str | None = None) -> bool:
        """A finished item runs again at `version` (a changed file, or a cancelled one that
        came back): its outcome moves into the record's history for it, and it is pending.
        False unless it had finished."""
        current = self.state(name)
        if not may_rerun(current):
            return False
        if self.batches is not None:
            self.batches.release(self._hash(name))  # its batch lets go of it; history below
        self.record.rerun(self._hash(name), version)
        with self._lock:
            keep_version(self._versions, name, version)
            self._local[name] = pair(State.PENDING.value, 0)
        return True

    def gave_up(self, name: str) -> bool:
        """A failure no retry fixes: its Job failed fast, or the record says so - or it failed
        in a batch, whose Job ran every attempt it had."""
        key = self._hash(name)
        batched = self._batch_state(name, key)
        if batched is not None:
            return batched[0] == State.FAILED.value
        job = self._job(name, key)
        if job is not None and failed_fast(job):
            return True
        return self.record.final(key)

    def note_manager(self, facts: dict | None) -> None:
        """Kept in the queue's `<queue>-manager` ConfigMap (see `ManagerFacts`)."""
        if self.facts is not None:
            self.facts.write(facts)

    def probe(self) -> None:
        """Nothing of this record is written to a local disk: no `StorageFault` to wait out."""

    def close(self) -> None:
        return None
