"""A queue whose keys can be added later: `add_after(key, seconds)` (client-go's DelayingQueue).

Design: waiting keys live in a min-heap ordered by ready time, and one background thread per
queue sleeps on the injected clock until the earliest ready time, then `add()`s whatever is due.
The thread starts with the queue and ends at shut-down; `shut_down()` joins it, so no thread is
left behind.

A key waits at most once: adding it again with a *later* ready time changes nothing, with an
*earlier* one moves it forward (the earlier ready time wins). The heap may hold superseded
entries; `_waiting` says which entry is current, and the loop drops the others as it meets them.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from sys import getsizeof
from typing import Any

from .events import Event
from .queue import _COMPACT_ABOVE_BYTES, Queue


class DelayingQueue(Queue):
    """A `Queue` plus `add_after`. Same constructor arguments as `Queue`."""

    def __init__(self, name: str = "", **kwargs: Any) -> None:
        super().__init__(name, **kwargs)
        self._waiting_cond = threading.Condition(threading.Lock())
        # Invariant: for every key in _waiting -> (ready_at, seq), the heap holds the entry
        # (ready_at, seq, key); that entry is the key's one current ready time. Others are stale.
        self._heap: list[tuple[float, int, Any]] = []
        self._waiting: dict[Any, tuple[float, int]] = {}
        self._seq = itertools.count()
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
            if current is not None and current[0] <= ready_at:
                return
            seq = next(self._seq)
            self._waiting[key] = (ready_at, seq)
            heapq.heappush(self._heap, (ready_at, seq, key))
            if self._heap[0][1] == seq:  # new earliest deadline: the loop must wake sooner
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
                while heap and heap[0][0] <= now:
                    ready_at, seq, key = heapq.heappop(heap)
                    if self._waiting.get(key) == (ready_at, seq):
                        del self._waiting[key]
                        due.append(key)
                if not due:
                    if not heap and getsizeof(self._waiting) > _COMPACT_ABOVE_BYTES:
                        self._waiting = {}
                    if self._shutting_down:
                        break
                    self.clock.wait(self._waiting_cond, heap[0][0] if heap else None)
                    continue
            for key in due:
                self.add(key)
            due.clear()

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
