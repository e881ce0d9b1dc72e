"""The line's order kept, in batches: slots first, then as many items from the head of the line
as there are slots for them, handed to the backend as one batch (`Backend.run_batch`).

For a backend that runs several items as one unit (Kubernetes: one Indexed Job of up to
`--batch-size` items), the dispatcher's single former does, over and over:

    waits until an item is in line ──► takes a capacity slot ──► begins the head of the line
        ──► while the batch has room: one more free slot (never waited for) ──► the next
            item of the line ──► … for at most `wait` seconds while items wait for slots
        ──► hands the batch to a thread of its own (`Reconciler.finish_batch`)

so every member has a slot (the batch's parallelism is its size: none waits inside it), the
batches are filled from the head of the line in order, and the slots count against the
parallelism in force like any others. Each member gives its slot back the moment its outcome
is reported - its siblings may run on - and is settled alone (`settle(name, result, error)`,
the manager's), so retries, metrics and `status` stay per item.

A batch's thread lives until its batch is recorded, after its members gave their slots
back; where the record's writes lag (the limiter's queries a second, shared with the Jobs),
finished batches waiting for their record piled up - 124 threads and 500 MB after a minute
at 2,700 items a second. So the former begins no batch while MOST_BATCHES_PER_SLOTS times
the batches the parallelism fills (at least two) have not ended: the line waits, not memory.

`wait` trades latency for API calls: slots that free within it go to one batch, not to one
batch each. An item whose data would not fit the batch (`item_bytes` past `room`, kept as a
running sum) begins the next one.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from .capacity import Capacity
from .reconciler import Reconciler, Result, Started

log = logging.getLogger(__name__)

Settle = Callable[[str, Result | None, BaseException | None], None]
POLL_SECONDS = 0.02  # how often the former looks for slots and items while it waits
EMPTY_GRACE = 0.05  # a line empty this long is empty (a listing is queued in one burst)
MOST_BATCHES_PER_SLOTS = 2  # batches not ended, at most, for each the parallelism fills


class BatchDispatcher:
    def __init__(
        self,
        line,
        capacity: Capacity,
        reconciler: Reconciler,
        settle: Settle,
        *,
        batch_size: int,
        item_bytes: Callable[[str, dict, int], int],
        room: int,
        wait: float = 1.0,
    ) -> None:
        """`item_bytes(name, data, attempt)` is what one item takes of a batch's `room`."""
        self.line = line
        self.capacity = capacity
        self.reconciler = reconciler
        self.settle = settle
        self.batch_size = batch_size
        self.item_bytes = item_bytes
        self.room = room
        self.wait = wait
        self.batches = 0  # batches handed to the backend so far
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._ended = threading.Condition(self._lock)  # notified as each batch's thread ends
        self._unended = 0  # (under _lock) batches handed whose thread has not ended
        self._former = threading.Thread(target=self._form, name="batcher", daemon=True)

    def start(self) -> BatchDispatcher:
        self._former.start()
        return self

    def grow(self, workers: int) -> None:
        """Nothing to grow: each batch has a thread of its own."""

    def join(self) -> None:
        """Wait until the former and every batch have ended (after the line was shut down
        and the capacity closed)."""
        self._former.join()
        while True:
            with self._lock:
                running = [t for t in self._threads if t.is_alive()]
            if not running:
                return
            for thread in running:
                thread.join()

    # -- forming ---------------------------------------------------------------------------

    def _form(self) -> None:
        carried: Started | None = None  # begun, with its slot: it opens the next batch
        while True:
            if carried is None and not (self.line.wait_for_key() and self._batch_may_begin()
                                        and self.capacity.acquire()):  # fmt: skip
                return
            batch, carried, stop = self._fill(carried)
            if batch:
                self._hand(batch)
            if stop:
                return

    def _fill(self, carried: Started | None) -> tuple[list[Started], Started | None, bool]:
        """One batch, with one slot already held (the carried item's, or one just taken):
        (its members, an item begun that did not fit, whether the line was shut down). Slots
        not used by a member are given back."""
        members: list[Started] = []
        used = 0  # bytes of the batch's room its members take
        slots = 1
        if carried is not None:
            members.append(carried)
            used = self._bytes(carried)
        deadline = time.monotonic() + self.wait
        stop = False
        empty_since: float | None = None  # the line is fed in bursts: a moment's grace
        while len(members) < self.batch_size:
            if slots > len(members) and self.line.has_waiting():
                name, shutdown = self.line.get()
                if shutdown:
                    stop = True
                    break
                started = self._begin(name)
                if started is None:
                    continue
                size = self._bytes(started)
                if members and used + size > self.room:
                    carried_next = started  # it keeps its slot for the next batch
                    self._give_back(slots - len(members) - 1)
                    return members, carried_next, False
                members.append(started)
                used += size
                continue
            if slots == len(members) and self.line.has_waiting() and self.capacity.try_acquire():
                slots += 1
                continue
            now = time.monotonic()
            if not self.line.has_waiting():
                empty_since = now if empty_since is None else empty_since
            else:
                empty_since = None
            if now >= deadline or (members and empty_since is not None
                                   and now - empty_since >= EMPTY_GRACE):  # fmt: skip
                break  # waited long enough for slots, or the line is empty: go as it is
            self.capacity.wait(POLL_SECONDS)
        self._give_back(slots - len(members))
        return members, None, stop

    def _bytes(self, started: Started) -> int:
        return self.item_bytes(started.name, started.data, started.attempt)

    def _give_back(self, count: int) -> None:
        for _ in range(count):
            self.capacity.release()

    def _begin(self, name: str) -> Started | None:
        """`Reconciler.begin`, its answers settled here when nothing is to run (the slot
        stays the batch's, for the next item)."""
        try:
            started = self.reconciler.begin(name)
        except Exception as exc:  # the source did not answer, the disk refused the start
            self.settle(name, None, exc)
            return None
        if isinstance(started, Result):
            self.settle(name, self.reconciler.report(name, started), None)
            return None
        return started

    # -- running ---------------------------------------------------------------------------

    def _batch_may_begin(self) -> bool:
        """Wait while too many batches have not ended (the module docstring). True."""
        with self._ended:
            while True:
                filled = -(-max(1, self.capacity.limit) // self.batch_size)
                if self._unended < MOST_BATCHES_PER_SLOTS * filled:
                    return True
                self._ended.wait(1.0)  # (a parallelism raised meanwhile is read again)

    def _hand(self, batch: list[Started]) -> None:
        self.batches += 1
        thread = threading.Thread(
            target=self._run, args=(batch,), name=f"batch-{self.batches}", daemon=True
        )
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.append(thread)
            self._unended += 1
        thread.start()

    def _run(self, batch: list[Started]) -> None:
        def done(started: Started, result: Result | None, error: BaseException | None) -> None:
            self.capacity.release()  # its siblings may run on: this slot is free now
            self.settle(started.name, result, error)

        try:
            self.reconciler.finish_batch(batch, done)
        finally:
            with self._ended:
                self._unended -= 1
                self._ended.notify_all()
