"""One item at a time: decide, fetch, record the start, run, record the outcome.

`reconcile(name)` is level-based (as client-go's controllers are): it looks at what the ledger
says *now* and makes reality match - so being handed the same name twice is harmless:

    succeeded, or running             -> nothing to do
    failed with no attempts left      -> nothing to do (stays failed until `workqueue retry`)
    cancelled                         -> nothing to do (it left the source)
    otherwise                         -> a capacity slot               (before anything else:
                                         reserving work you cannot run yet starves rival
                                         managers - buildkite/agent-stack-k8s#953)
                                      -> GET /api/v1/items/<name>      (gone -> nothing to do)
                                      -> ledger: running, attempt n    (under the gate of
                                                                        `Cancellations`)
                                      -> backend.run(..., cancel)      (blocks until it ends)
                                      -> ledger: succeeded | failed | pending (interrupted)
                                                 | cancelled (its `Cancel` was set)

It comes in two halves so the dispatcher (`manager.runtime.dispatcher`) can start items in
the line's order and run them side by side: `begin(name)` - with a slot already held - does
everything up to the recorded start, `finish(started)` runs and records. `reconcile(name)` is
the two in one thread, taking and giving back the slot itself.

It depends only on the ports (`manager.ports`): any ledger, source and backend will do. The
caller follows client-go's worker pattern with the `Result`: RETRY -> `add_rate_limited(name)`;
anything else -> `forget(name)`; always `done(name)`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from ..durations import human
from ..faults import StorageFault
from ..ports import Backend, Cancel, ClaimsWork, ItemLedger, Outcome, Source, State
from ..retry import RetryPolicy
from .cancellation import Cancellations
from .capacity import Capacity

log = logging.getLogger(__name__)
ASK = object()  # `needs_work`: read the item's state from the ledger


class Result(StrEnum):
    SKIPPED = "skipped"  # already succeeded, running, or out of attempts
    SUCCEEDED = "succeeded"
    FAILED = "failed"  # failed for good (no attempts left)
    RETRY = "retry"  # failed or could not start; try again after a backoff
    GONE = "gone"  # the source no longer has it
    CANCELLED = "cancelled"  # it left the source (--cancel-removed): not run, or ended
    STOPPED = "stopped"  # the manager is stopping; the item stays pending
    ELSEWHERE = "elsewhere"  # another manager on a shared ledger ran it to its end
    HELD = "held"  # it left the source in a held mass removal: neither started nor cancelled


@dataclass(slots=True)
class Started:
    """An item whose start is recorded (`Reconciler.begin`): what `finish` needs to run it.
    Only `shed` changes it."""

    name: str
    data: dict[str, Any]
    attempt: int
    cancel: Cancel
    adopted: bool = False  # its worker already runs (a cancel set before it is followed ends it)

    def shed(self) -> None:
        """Let go of the item's data: the backend wrote it where the worker reads it (a
        batch's ConfigMap). A batch waits for its record holding its members; with their data
        each waiting batch of 1,000 held 2.3 MB, and the manager's peak grew with every batch
        while the record's writes lagged at 20 queries a second (half of it was the data)."""
        self.data = {}


class NeedsWork:
    """Whether an item needs work, as its ledger and the retry policy say - the poller's diff,
    asked by the reconciler, the intake, the removals and the fleet's follower alike."""

    def __init__(self, ledger: ItemLedger, policy: RetryPolicy) -> None:
        self.ledger = ledger
        self.policy = policy

    def __call__(self, name: str, current: tuple[str, int] | None | object = ASK) -> bool:
        """False when the ledger says there is nothing to do for `name` (the poller's diff);
        `current` is its `ledger.state(name)` when the caller has just read it."""
        if current is ASK:
            current = self.ledger.state(name)
        if current is None:
            return True
        if current[0] == State.FAILED and self.ledger.gave_up(name):
            return False
        return self.policy.needs_work(*current)


class Reconciler:
    def __init__(
        self,
        ledger: ItemLedger,
        source: Source,
        backend: Backend,
        capacity: Capacity,
        *,
        policy: RetryPolicy | None = None,
        cancellations: Cancellations | None = None,
        on_outcome: Callable[[str, Result, Outcome | None], None] | None = None,
        on_dispatch: Callable[[str], None] | None = None,
        withheld: Callable[[str], bool] | None = None,
        missing: Callable[[str], Result | None] | None = None,
        needs_work: NeedsWork | None = None,
        unrecorded: dict[str, tuple[int, Outcome]] | None = None,
    ) -> None:
        self.ledger = ledger
        self.source = source
        self.backend = backend
        self.capacity = capacity
        self.policy = policy or RetryPolicy()
        self.cancellations = cancellations or Cancellations(ledger, backend)
        self.on_outcome = on_outcome
        self.on_dispatch = on_dispatch  # told when an item stops waiting and starts
        # whether an item is in a held removal (`leaving.Leaving.withholds`): not started
        self.withheld = withheld or (lambda name: False)
        # what an item the source gives no data for is, when the removal guard is to judge
        # it (`leaving.Leaving.missing`: held or cancelled); None - or no judge - is GONE
        self.missing = missing or (lambda name: None)
        # name -> (attempt, outcome) of runs that ended while the ledger could not be written
        # (a `StorageFault`): still running in the ledger, recorded by `record_unrecorded`.
        # Changed under the cancellations' gate.
        # (the fault hold counts it: `runtime.wiring` hands both the same dict)
        self.unrecorded: dict[str, tuple[int, Outcome]] = {} if unrecorded is None else unrecorded
        # whether an item needs work (`NeedsWork`: the ledger and the retry policy)
        self.needs_work = needs_work or NeedsWork(ledger, self.policy)

    # -- one item in one thread ------------------------------------------------------------

    def reconcile(self, name: str) -> Result:
        """The whole step for one item: a slot (waited for), `begin`, `finish`, the slot back.
        A `StorageFault` or `SourceError` propagates, the slot given back."""
        if not self.needs_work(name):
            return self._told(name, Result.SKIPPED, None)
        if not self.capacity.acquire():
            return self._told(name, Result.STOPPED, None)
        try:
            started = self.begin(name)
            if isinstance(started, Result):
                return self._told(name, started, None)
            return self.finish(started)
        finally:
            self.capacity.release()

    # -- the two halves --------------------------------------------------------------------

    def begin(self, name: str) -> Started | Result:
        """With a capacity slot held: fetch the item and record its start. A `Result` when
        nothing is to run (the caller gives the slot back and reports it: `report`). The
        source's errors and a `StorageFault` propagate - nothing started."""
        if not self.needs_work(name):
            return self._nothing_to_do(name)
        if self.withheld(name):  # it left the source: started only if it comes back
            return Result.HELD
        data = self.source.get_item(name)
        if data is None:  # gone - unless it left with many others: the guard's to judge
            return self.missing(name) or Result.GONE
        with self.cancellations.gate:
            self.ledger.see([name])
            if not self.needs_work(name):  # cancelled (or done elsewhere) meanwhile
                return self._nothing_to_do(name)
            if self.on_dispatch is not None:
                self.on_dispatch(name)
            log_path = self.backend.log_path(name)
            attempt = self.ledger.start(name, log_path, data.get("version"))
            cancel = self.cancellations.started(name)
        return Started(name, data, attempt, cancel)

    def _nothing_to_do(self, name: str) -> Result:
        """Why an item taken from the line needs no work: CANCELLED when it left the source
        while it waited (whoever reports first, a --once run counts it cancelled, not "already
        done"), else SKIPPED."""
        current = self.ledger.state(name)
        if current is not None and current[0] == State.CANCELLED:
            return Result.CANCELLED
        return Result.SKIPPED

    def finish(self, started: Started) -> Result:
        """Run a started item and record how it ended (the slot stays the caller's). A
        `StorageFault` propagates: from the backend (nothing ran: the item is put back, its
        attempt not counted), or from the ledger (the outcome waits in `unrecorded`)."""
        try:
            result, outcome = self._run(started)
        finally:
            self.cancellations.ended(started.name)
        return self._told(started.name, result, outcome)

    def finish_batch(self, batch: list[Started], done: Callable) -> None:
        """Run begun items as one batch (`Backend.run_batch`, a backend that batches) and
        record each member's outcome as `finish` does, as the backend reports it; then
        `done(started, result, error)` for that member (error: a `StorageFault` from the
        ledger, the outcome waiting in `unrecorded`). Every member is told exactly once."""
        told: set[str] = set()
        began = time.monotonic()

        def report(started: Started, outcome: Outcome) -> None:
            if started.name in told:
                return
            told.add(started.name)
            if outcome.seconds is None:
                outcome = replace(outcome, seconds=time.monotonic() - began)
            if started.cancel.is_set() and not outcome.succeeded and not outcome.interrupted:
                outcome = replace(outcome, cancelled=True)
            result, error = None, None
            try:
                result = self._record(started.name, started.attempt, outcome)
                self._told(started.name, result, outcome)
            except StorageFault as exc:
                with self.cancellations.gate:
                    self.unrecorded[started.name] = (started.attempt, outcome)
                error = exc
            finally:
                self.cancellations.ended(started.name)
            done(started, result, error)

        try:
            self.backend.run_batch(batch, report)
        except Exception as exc:  # never leave a member marked running
            log.exception("a batch of %d: the backend failed", len(batch))
            failed = Outcome(False, error=f"backend error: {type(exc).__name__}: {exc}")
            for started in batch:
                report(started, failed)
        for started in batch:  # a backend that forgot one: it is put back, not lost
            report(started, Outcome(False, interrupted=True))

    def report(self, name: str, result: Result) -> Result:
        """Tell `on_outcome` of a `begin` that started nothing."""
        return self._told(name, result, None)

    def _told(self, name: str, result: Result, outcome: Outcome | None) -> Result:
        if self.on_outcome is not None:
            self.on_outcome(name, result, outcome)
        return result

    def _run(self, started: Started) -> tuple[Result, Outcome]:
        name, attempt, cancel = started.name, started.attempt, started.cancel
        began = time.monotonic()
        fault = None
        try:
            if cancel.is_set() and not started.adopted:  # asked to end before it began
                outcome = Outcome(False, error="cancelled: it left the source", cancelled=True)
            else:
                outcome = self.backend.run(name, started.data, attempt, cancel)
        except StorageFault as exc:  # the item file or its log could not be written
            fault = exc
            outcome = Outcome(False, interrupted=True)
        except Exception as exc:  # never leave the item marked running
            log.exception("%s: the backend failed", name)
            outcome = Outcome(False, error=f"backend error: {type(exc).__name__}: {exc}")
        if outcome.seconds is None:  # an adopted worker's comes from its keeper's clock
            outcome = replace(outcome, seconds=time.monotonic() - began)
        if cancel.is_set() and not outcome.succeeded and not outcome.interrupted:
            outcome = replace(outcome, cancelled=True)  # however the ending looked to it
        try:
            result = self._record(name, attempt, outcome)
        except StorageFault:
            with self.cancellations.gate:
                self.unrecorded[name] = (attempt, outcome)
            raise
        if fault is not None:
            raise fault
        return result, outcome

    def record_unrecorded(self) -> list[tuple[str, Result, Outcome]]:
        """Record the outcomes a `StorageFault` kept from the ledger (oldest first); the fault
        again while it stands. Returns what was recorded now."""
        done = []
        with self.cancellations.gate:
            waiting = list(self.unrecorded.items())
        for name, (attempt, outcome) in waiting:
            result = self._record(name, attempt, outcome)
            with self.cancellations.gate:
                self.unrecorded.pop(name, None)
            done.append((name, result, outcome))
        return done

    def _record(self, name: str, attempt: int, outcome: Outcome) -> Result:
        """Write how the started item's attempt ended; the result for the worker loop."""
        if outcome.interrupted:
            if outcome.outlives and isinstance(self.ledger, ClaimsWork):
                return Result.STOPPED  # its Job runs on: the claim stays, adopted next time
            self.ledger.requeue(name)
            return Result.STOPPED
        if outcome.cancelled:
            self.ledger.cancel(name)
            log.info("%s: cancelled while running (it left the source)", name)
            return Result.CANCELLED
        self.ledger.finish(name, outcome.succeeded, outcome.exit_code, outcome.error)
        if outcome.succeeded:
            return Result.SUCCEEDED
        if outcome.final or self.policy.gave_up(attempt):
            # a final outcome says why itself (its retries, if any, were not the manager's)
            tries = "" if outcome.final else f" after {attempt} attempt{'s' * (attempt != 1)}"
            log.warning("%s failed for good%s: %s", name, tries, outcome.error)
            return Result.FAILED
        log.info(
            "%s failed (attempt %d of %d): %s; will retry in %s",
            name,
            attempt,
            self.policy.max_attempts,
            outcome.error,
            human(self.policy.item_backoff.delay(attempt - 1)),
        )
        return Result.RETRY
