"""The line's order kept: a capacity slot first, then the item at the head of the line.

A worker that takes an item first and then waits for a slot holds that item while it waits;
with more workers than slots (paused, autoscaled down, a rival's Jobs counted) the waiting
workers wake in whatever order the condition variable picks, and the line's order - what
`status` shows as positions and predicted starts - is lost. Here one dispatcher thread does,
for ever:

    wait until an item is in line ──► take a capacity slot ──► take the head of the line
          ──► `Reconciler.begin` (fetch, record the start: in line order)
          ──► hand the started item to a worker, which runs it (`finish`) and frees the slot

so items start in the order they were queued, whatever the number of workers and slots, and
batches or priorities can be built on the one place that picks the next item. The workers
(as many as the most units of work that may ever run at once) only run what was started.

What the dispatcher cannot settle itself - an item that needs no work, a source that did not
answer, a `StorageFault` - goes to `settle(name, result, error)`, the manager's, which does the
workqueue's duty (`forget` or `add_rate_limited`, and `done`) for every item it was handed.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable

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
        """`line` is the workqueue (`get`, `wait_for_key`); `settle(name, result, error)` is
        told how each item it took ended: a `Result`, or the exception that stopped it."""
        self.line = line
        self.capacity = capacity
        self.reconciler = reconciler
        self.settle = settle
        self.workers = workers
        # Started items waiting for a worker; None tells a worker to leave. Invariant: every
        # item in it holds a capacity slot.
        self._handoff: queue.SimpleQueue[Started | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []

    def start(self) -> Dispatcher:
        for i in range(self.workers):
            self._spawn(self._work, f"worker-{i + 1}")
        self._spawn(self._dispatch, "dispatcher")
        return self

    def join(self) -> None:
        """Wait until the dispatcher and every worker have left (after the line was shut down
        and the capacity closed)."""
        for thread in self._threads:
            thread.join()

    def _spawn(self, target, name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _dispatch(self) -> None:
        try:
            while self.line.wait_for_key() and self.capacity.acquire():
                name, shutdown = self.line.get()
                if shutdown:
                    self.capacity.release()
                    return
                self._begin(name)
        finally:
            for _ in range(self.workers):
                self._handoff.put(None)

    def _begin(self, name: str) -> None:
        try:
            started = self.reconciler.begin(name)
        except Exception as exc:  # the source did not answer, the disk refused the start
            self.capacity.release()
            self.settle(name, None, exc)
            return
        if isinstance(started, Result):  # nothing to run: the slot goes back at once
            self.capacity.release()
            self.settle(name, self.reconciler.report(name, started), None)
            return
        self._handoff.put(started)

    def _work(self) -> None:
        while (started := self._handoff.get()) is not None:
            result, error = None, None
            try:
                result = self.reconciler.finish(started)
            except Exception as exc:  # a StorageFault: the record could not be written
                error = exc
            finally:
                self.capacity.release()
            self.settle(started.name, result, error)
