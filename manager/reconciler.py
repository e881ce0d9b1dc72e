"""One item at a time: decide, take capacity, fetch, record, dispatch, record.

`reconcile(name)` is level-based (as client-go's controllers are): it looks at what the ledger
says *now* and makes reality match - so being handed the same name twice is harmless:

    succeeded, or running             -> nothing to do
    failed with no attempts left      -> nothing to do (stays failed until `workqueue retry`)
    cancelled                         -> nothing to do (it left the source)
    otherwise                         -> wait for a capacity slot      (before anything else:
                                         reserving work you cannot run yet starves rival
                                         managers - buildkite/agent-stack-k8s#953)
                                      -> GET /api/v1/items/<name>      (gone -> nothing to do)
                                      -> ledger: running, attempt n    (under `gate`)
                                      -> backend.run(...)              (blocks until it ends)
                                      -> ledger: succeeded | failed | pending (interrupted)
                                                 | cancelled (`Backend.cancel` ended it)

`gate` orders the two ways an item leaves pending: the start above, and a cancel
(`Manager.cancel_removed`), which takes the gate to read the state and act on it. So a cancel
sees an item either still pending (and cancels it: it never starts) or running (and asks the
backend to end it); never in between.

It depends only on the ports (`manager.ports`): any ledger, source and backend will do.
The caller (the manager's worker loop) follows client-go's worker pattern with the `Result`:
RETRY -> `add_rate_limited(name)`; anything else -> `forget(name)`; always `done(name)`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from enum import StrEnum

from .capacity import Capacity
from .faults import StorageFault
from .ports import Backend, Ledger, Outcome, Source, State
from .retry import RetryPolicy

log = logging.getLogger(__name__)


class Result(StrEnum):
    SKIPPED = "skipped"  # already succeeded, running, or out of attempts
    SUCCEEDED = "succeeded"
    FAILED = "failed"  # failed for good (no attempts left)
    RETRY = "retry"  # failed or could not start; try again after a backoff
    GONE = "gone"  # the source no longer has it
    CANCELLED = "cancelled"  # it left the source (--cancel-removed): not run, or ended
    STOPPED = "stopped"  # the manager is stopping; the item stays pending


class Reconciler:
    def __init__(
        self,
        ledger: Ledger,
        client: Source,
        backend: Backend,
        capacity: Capacity,
        *,
        policy: RetryPolicy | None = None,
        on_outcome: Callable[[str, Result, Outcome | None], None] | None = None,
        on_dispatch: Callable[[str], None] | None = None,
    ) -> None:
        self.ledger = ledger
        self.client = client
        self.backend = backend
        self.capacity = capacity
        self.policy = policy or RetryPolicy()
        self.on_outcome = on_outcome
        self.on_dispatch = on_dispatch  # told when an item stops waiting and starts
        self.gate = threading.Lock()  # see the module docstring
        # Invariants (changed under `gate`): in_flight holds the names this reconciler is
        # between `ledger.start` and the outcome of; cancelling, those of them asked to end.
        self.in_flight: set[str] = set()
        self.cancelling: set[str] = set()
        # name -> (attempt, outcome) of runs that ended while the ledger could not be written
        # (a `StorageFault`): still running in the ledger, recorded by `record_unrecorded`.
        self.unrecorded: dict[str, tuple[int, Outcome]] = {}

    def needs_work(self, name: str) -> bool:
        """False when the ledger says there is nothing to do for `name` (the poller's diff)."""
        current = self.ledger.state(name)
        if current is None:
            return True
        if current[0] == State.FAILED and self.ledger.gave_up(name):
            return False
        return self.policy.needs_work(*current)

    def reconcile(self, name: str) -> Result:
        result, outcome = self._reconcile(name)
        if self.on_outcome is not None:
            self.on_outcome(name, result, outcome)
        return result

    def _reconcile(self, name: str) -> tuple[Result, Outcome | None]:
        if not self.needs_work(name):
            return Result.SKIPPED, None
        if not self.capacity.acquire():
            return Result.STOPPED, None
        try:
            data = self.client.get_item(name)  # SourceUnavailable propagates: caller retries
            if data is None:
                return Result.GONE, None
            with self.gate:
                self.ledger.see([name])
                if not self.needs_work(name):  # cancelled (or done elsewhere) meanwhile
                    return Result.SKIPPED, None
                if self.on_dispatch is not None:
                    self.on_dispatch(name)
                log_path = self.backend.log_path(name)
                attempt = self.ledger.start(name, log_path, data.get("version"))
                self.in_flight.add(name)
            try:
                return self._run(name, data, attempt)
            finally:
                with self.gate:
                    self.in_flight.discard(name)
                    self.cancelling.discard(name)
        finally:
            self.capacity.release()

    def _run(self, name: str, data: dict, attempt: int) -> tuple[Result, Outcome | None]:
        """Run the started item and record how it ended. A `StorageFault` propagates: from
        the backend (nothing ran: the item is put back, its attempt not counted), or from
        the ledger (the outcome is kept in `unrecorded` until `record_unrecorded`)."""
        started = time.monotonic()
        fault = None
        try:
            if name in self.cancelling:  # asked to end before it began
                outcome = Outcome(False, error="cancelled: it left the source", cancelled=True)
            else:
                outcome = self.backend.run(name, data, attempt)
        except StorageFault as exc:  # the item file or its log could not be written
            fault = exc
            outcome = Outcome(False, interrupted=True)
        except Exception as exc:  # never leave the item marked running
            log.exception("%s: the backend failed", name)
            outcome = Outcome(False, error=f"backend error: {type(exc).__name__}: {exc}")
        outcome = replace(outcome, seconds=time.monotonic() - started)
        if name in self.cancelling and not outcome.succeeded and not outcome.interrupted:
            outcome = replace(outcome, cancelled=True)  # however the ending looked to it
        try:
            result = self._record(name, attempt, outcome)
        except StorageFault:
            with self.gate:
                self.unrecorded[name] = (attempt, outcome)
            raise
        if fault is not None:
            raise fault
        return result, outcome

    def record_unrecorded(self) -> list[tuple[str, Result, Outcome]]:
        """Record the outcomes a `StorageFault` kept from the ledger (oldest first); the fault
        again while it stands. Returns what was recorded now."""
        done = []
        with self.gate:
            waiting = list(self.unrecorded.items())
        for name, (attempt, outcome) in waiting:
            result = self._record(name, attempt, outcome)
            with self.gate:
                self.unrecorded.pop(name, None)
            done.append((name, result, outcome))
        return done

    def _record(self, name: str, attempt: int, outcome: Outcome) -> Result:
        """Write how the started item's attempt ended; the result for the worker loop."""
        if outcome.interrupted:
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
            log.warning("%s failed for good after %d attempts: %s", name, attempt, outcome.error)
            return Result.FAILED
        log.info(
            "%s failed (attempt %d of %d): %s; will retry",
            name,
            attempt,
            self.policy.max_attempts,
            outcome.error,
        )
        return Result.RETRY
