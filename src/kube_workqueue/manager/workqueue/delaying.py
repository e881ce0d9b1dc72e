"""A queue whose keys can be added later: `add_after(key, seconds)` (client-go's DelayingQueue).

Design: the ready times live in a min-heap of plain floats (float comparisons are the cheapest
thing heapq can do, so the log-n part of a push or pop stays small as the heap grows), with the
keys due at each time in a dict beside it; one background thread per queue sleeps on the injected
clock until the earliest ready time, then `add()`s whatever is due.
The thread starts with the queue and ends at shut-down; `shut_down()` joins it, so no thread is
left behind.

A key waits at most once: adding it again with a *later* ready time changes nothing, with an
*earlier* one moves it forward (the earlier ready time wins). A moved key leaves a superseded
entry behind; `_waiting` says which ready time is current, and the loop drops the others as it
meets them.
"""

from __future__ import annotations

import heapq
import threading
from sys import getsizeof
from typing import Any

from .events import Event
from .queue import _COMPACT_ABOVE_BYTES, Queue

_BULK_AFTER = 64  # due times popped one by one before the rest are split off in bulk


class DelayingQueue(Queue):
    """A `Queue` plus `add_after`. Same constructor arguments as `Queue`."""

    def __init__(self, name: str = "", **kwargs: Any) -> None:
        super().__init__(name, **kwargs)
        self._waiting_cond = threading.Condition(threading.Lock())
        # Invariants: every float in _heap is a key of _due_at, once; _due_at[t] lists the keys
        # that were scheduled for t; for every key in _waiting, _waiting[key] is its one current
        # ready time and the key is listed in _due_at[_waiting[key]]. Other listings are stale.
        self._heap: list[float] = []
        self._due_at: dict[float, list[Any]] = {}
        self._waiting: dict[Any, float] = {}
        self._thread = threading.Thread(
            target=self._waiting_loop, name=f"workqueue-delay-{name or id(self)}", daemon=True
        )
        self._thread.start()

    def add_after(self, key: Any, seconds: float) -> None:
        """Add `key` once `seconds` have passed on the queue's clock; `seconds <= 0` adds now.
        Ignored after shut-down."""
        if self._shutting_down:
            return
        if self._metrics is not None or self._observer is not None:
            with self._cond:
                if self._metrics is not None:
                    self._metrics.retries += 1
                if self._observer is not None:
                    self._observer(Event.DELAYED, key, {"delay": seconds})
        if seconds <= 0:
            self.add(key)
            return
        with self._waiting_cond:
            ready_at = self.clock.now() + seconds
            current = self._waiting.get(key)
            if current is not None and current <= ready_at:
                return
            self._waiting[key] = ready_at
            keys = self._due_at.get(ready_at)
            if keys is not None:
                keys.append(key)
                return
            self._due_at[ready_at] = [key]
            heapq.heappush(self._heap, ready_at)
            if self._heap[0] == ready_at:  # new earliest deadline: the loop must wake sooner
                self._waiting_cond.notify()

    def waiting_count(self) -> int:
        """Keys waiting for their ready time (not yet in the FIFO)."""
        with self._waiting_cond:
            return len(self._waiting)

    def _waiting_loop(self) -> None:
        due: list[Any] = []
        while not self._shutting_down:
            with self._waiting_cond:
                now = self.clock.now()
                heap = self._heap
                waiting = self._waiting
                for ready_at in self._pop_due_times(now):
                    for key in self._due_at.pop(ready_at):
                        if waiting.get(key) == ready_at:
                            del waiting[key]
                            due.append(key)
                if not due:
                    if not heap and getsizeof(waiting) > _COMPACT_ABOVE_BYTES:
                        self._waiting, self._due_at = {}, {}
                    if self._shutting_down:
                        break
                    self.clock.wait(self._waiting_cond, heap[0] if heap else None)
                    continue
            for key in due:
                self.add(key)
            due.clear()

    def _pop_due_times(self, now: float) -> list[float]:
        """Remove and return, in order, the heap's ready times <= now (caller holds the lock).

        A few are popped one by one (k·log n); past `_BULK_AFTER` the rest are split off in one
        pass and sorted (n + k·log k, in C), so releasing a large burst at once - a clock jump,
        a thundering herd of retries - does not pay log n per key.
        """
        heap, times = self._heap, []
        while heap and heap[0] <= now:
            if len(times) == _BULK_AFTER:
                times.extend(sorted(t for t in heap if t <= now))
                heap[:] = [t for t in heap if t > now]
                heapq.heapify(heap)
                break
            times.append(heapq.heappop(heap))
        return times

    def _stop_waiting_loop(self) -> None:
        with self._waiting_cond:
            self._waiting_cond.notify_all()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout=5)

    def shut_down(self) -> None:
        super().shut_down()
        self._stop_waiting_loop()

    def shut_down_with_drain(self) -> None:
        with self._cond:
            self._shutting_down = True  # stop the waiting loop before draining
        self._stop_waiting_loop()
        super().shut_down_with_drain()
