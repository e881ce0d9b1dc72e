"""The queue every waiter with a timeout takes its events or tasks from: `TimedQueue`, never
the standard library's SimpleQueue.

CPython's C `SimpleQueue.get(timeout=...)` (3.11 and 3.12 at least) waits for ever when a
signal interrupts its wait and the time left, recomputed after the signal's handler, has run
out: a negative time left is its "no timeout". A signal reaches any thread of the process, so
any timed `get` could meet it. Seen in the test suite: an ambassador's snapshot publisher,
SIGTERMed at the end of its half-second wait, stayed in that `get` for good - its parent gone,
it never looked again, and outlived it. Reproduced at will: a SIGALRM handler that sleeps past
a `get(timeout=0.1)`'s end leaves a SimpleQueue waiting for ever (tests/ambassador/
test_timed_queue.py).

`TimedQueue` is the standard library's own pure-Python SimpleQueue (_PySimpleQueue in its
queue module, private there): a deque and a semaphore that counts its items, whose timed wait is
`threading`'s - its lock recomputes the time left after a signal and gives up once it has run
out. Not queue's Queue, which waits as well: three conditions and a lock a queue - 36 KB an
idle watcher at the margin of 1,000 (`bench.ambassador`), against 31 with SimpleQueue and 34
with this one, a semaphore's condition and a deque. Invariant: the semaphore's count is the
number of items in the deque (an item is appended before it is counted, and taken after its
count is).
"""

from __future__ import annotations

import collections
import queue
import threading


class TimedQueue:
    """An unbounded FIFO queue for many producers and consumers whose `get(timeout=...)`
    returns within its timeout, signals or not - SimpleQueue's face: `put`, `put_nowait`,
    `get`, `get_nowait`, `empty`, `qsize`."""

    __slots__ = ("_items", "_count")

    def __init__(self) -> None:
        self._items: collections.deque = collections.deque()
        self._count = threading.Semaphore(0)

    def put(self, item, block: bool = True, timeout: float | None = None) -> None:
        """Never blocks (`block` and `timeout` are SimpleQueue's, ignored as there)."""
        self._items.append(item)
        self._count.release()

    def put_nowait(self, item) -> None:
        self.put(item)

    def get(self, block: bool = True, timeout: float | None = None):
        """The oldest item; queue's Empty when there is none (`block` false) or none came
        within `timeout` seconds (None: wait as long as it takes)."""
        if timeout is not None and timeout < 0:
            raise ValueError("'timeout' must be a non-negative number")
        taken = self._count.acquire(True, timeout) if block else self._count.acquire(False)
        if not taken:
            raise queue.Empty
        return self._items.popleft()

    def get_nowait(self):
        return self.get(False)

    def empty(self) -> bool:
        return not self._items

    def qsize(self) -> int:
        return len(self._items)
