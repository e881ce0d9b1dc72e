"""The line's order kept: a capacity slot first, then the item at the head of the line.

A worker that takes an item first and then waits for a slot holds that item while it waits;
with more workers than slots (paused, autoscaled down, a rival's Jobs counted) the waiting
workers wake in whatever order the condition variable picks, and the line's order - what
`status` shows as positions and predicted starts - is lost. Here the workers take turns at
dispatching; the one whose turn it is (under `_turn`, one at a time):

    waits until an item is in line ──► takes a capacity slot ──► takes the head of the line
          ──► `Reconciler.begin` (fetch, record the start: in line order)

then gives up the turn and runs what it began (`finish`). So items start in the order they
were queued, whatever the number of workers and slots, and batches or priorities can be built
on the one place that picks the next item. A worker whose work just ended takes the next turn
at once if nobody waits for it, and keeps its slot when the limit still allows
(`Capacity.keep`): one thread goes from one item to the next with no wake-up of another.

What the dispatcher cannot settle itself - an item that needs no work, a source that did not
answer, a `StorageFault` - goes to `settle(name, result, error)`, the manager's, which does the
workqueue's duty (`forget` or `add_rate_limited`, and `done`) for every item it was handed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from ..ports import RunsBatches
from .capacity import Capacity
from .reconciler import Reconciler, Result, Started

Settle = Callable[[str, Result | None, BaseException | None], None]


class Dispatcher:
    def __init__(
        self,
        line,
        capacity: Capacity,
        reconciler: Reconciler,
        settle: Settle,
        *,
        workers: int,
    ) -> None:
        """`line` is a `modes.Line` (the workqueue, or a shared ledger's claims);
        `settle(name, result, error)` is told how each item it took ended: a `Result`, or the
        exception that stopped it."""
        self.line = line
        self.capacity = capacity
        self.reconciler = reconciler
        self.settle = settle
        self.workers = workers
        self._turn = threading.Lock()  # whoever holds it is the one that takes from the line
        self._threads: list[threading.Thread] = []
        self._growing = threading.Lock()  # one `grow` at a time
        # whether an item waits for a slot a worker holds: a line that claims its items (a
        # shared ledger's, `claims.ClaimedLine`) claims one for that slot in the same step
        self._has_next = line.waiting_for_slot

    def start(self) -> Dispatcher:
        self._spawn(self.workers)
        return self

    def grow(self, workers: int) -> None:
        """At least `workers` workers from now on (a parallelism raised past the workers the
        manager started with: `workqueue scale`, the WorkQueue's spec). Never fewer: a lower
        parallelism is the capacity's to enforce."""
        with self._growing:  # not `_turn`: a worker holds that while it waits for work
            if workers > len(self._threads):
                self._spawn(workers - len(self._threads))
                self.workers = len(self._threads)

    def _spawn(self, count: int) -> None:
        for _ in range(count):
            name = f"worker-{len(self._threads) + 1}"
            thread = threading.Thread(target=self._work, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def join(self) -> None:
        """Wait until every worker has left (after the line was shut down and the capacity
        closed)."""
        for thread in self._threads:
            thread.join()

    def _work(self) -> None:
        kept = False  # whether this worker holds the slot of the work it just ended
        while True:
            if kept and self._turn.acquire(blocking=False):  # nobody waits: go on at once
                try:
                    started, leave = self._next(keep=True)
                finally:
                    self._turn.release()
            else:
                if kept:  # the worker whose turn it is may be waiting for this very slot
                    self.capacity.release()
                with self._turn:
                    started, leave = self._next(keep=False)
            kept = False
            if leave:
                return
            if started is not None:
                self._finish(started)
                kept = True

    def _next(self, *, keep: bool) -> tuple[Started | None, bool]:
        """One turn: (the item begun, or None; whether to leave). `keep`: this worker holds
        a slot already (`Capacity.keep` decides whether it may use it)."""
        if keep:
            if not self._has_next():  # nothing to keep it for: waiting must not hold a slot
                self.capacity.release()
                keep = False
            else:
                keep = self.capacity.keep()  # (a refused keep gives the slot back itself)
        if not keep and not (self.line.wait_for_key() and self.capacity.acquire()):
            return None, True
        name, shutdown = self.line.get()
        if shutdown:
            self.capacity.release()
            return None, True
        return self._begin(name), False

    def _begin(self, name: str) -> Started | None:
        try:
            started = self.reconciler.begin(name)
        except Exception as exc:  # the source did not answer, the disk refused the start
            self.capacity.release()
            self.settle(name, None, exc)
            return None
        if isinstance(started, Result):  # nothing to run: the slot goes back at once
            self.capacity.release()
            self.settle(name, self.reconciler.report(name, started), None)
            return None
        return started

    def _finish(self, started: Started) -> None:
        """Run a begun item; its slot stays this worker's (the next turn keeps or frees it)."""
        result, error = None, None
        try:
            result = self.reconciler.finish(started)
        except Exception as exc:  # a StorageFault: the record could not be written
            error = exc
        self.settle(started.name, result, error)


def dispatcher_for(backend, line, capacity: Capacity, reconciler: Reconciler, settle: Settle,
                   workers: int):  # fmt: skip
    """The dispatcher `backend` wants: batches (`batching.BatchDispatcher`) for a backend that
    runs several items as one unit (its `batch_size` > 1: Indexed Jobs), else this module's
    one item per worker. Not started."""
    if isinstance(backend, RunsBatches) and backend.batch_size > 1:
        from .batching import BatchDispatcher

        return BatchDispatcher(
            line, capacity, reconciler, settle,
            batch_size=backend.batch_size, item_bytes=backend.item_bytes,
            room=backend.batch_bytes, wait=backend.batch_wait,
        )  # fmt: skip
    return Dispatcher(line, capacity, reconciler, settle, workers=workers)
