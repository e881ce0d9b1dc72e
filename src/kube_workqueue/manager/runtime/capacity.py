"""How many units of work may run at once: a semaphore whose limit can change while it is held.

The dispatcher (or the batcher, for a batch) takes a slot *before* it takes an item out of
line, fetches its data, reserves it in the ledger or starts anything (reserving more than you
can run starves your peers: buildkite/agent-stack-k8s#953), and gives it back when the unit of
work has finished. The autoscaler (or `workqueue scale`, or the WorkQueue's spec) moves the
limit; lowering it never stops running work - new work simply waits until enough has finished.
A limit of 0 starts nothing new (how KEDA scales a queue to zero).

Invariant: 0 <= in_use, and in_use <= limit except right after the limit was lowered.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class Capacity:
    def __init__(
        self,
        limit: int,
        external: Callable[[], int] | None = None,
        paused: Callable[[], bool] | None = None,
    ) -> None:
        """`external()` counts work running elsewhere that uses the same limit (the Kubernetes
        backend's Jobs from a rival manager or an earlier run); `paused()` says the queue is
        held (`workqueue pause`): no slot is given while it is, running work keeps its slot.
        Call `poke()` when either changes; both are also re-read each second."""
        if limit < 1:
            raise ValueError("parallelism must be >= 1")
        self._external = external or (lambda: 0)
        self._paused = paused or (lambda: False)
        self._cond = threading.Condition()
        self._limit = limit
        self._in_use = 0
        self._closed = False

    @property
    def limit(self) -> int:
        return self._limit

    @property
    def in_use(self) -> int:
        return self._in_use

    def set_limit(self, limit: int) -> None:
        if limit < 0:
            raise ValueError("parallelism must be >= 0")
        with self._cond:
            self._limit = limit
            self._cond.notify_all()

    def acquire(self) -> bool:
        """Wait for a free slot and take it. False when closed (the manager is stopping): the
        caller must then not start anything. The caller's duty: `release()` every slot taken."""
        with self._cond:
            while not self._closed and (
                self._paused() or self._in_use + self._external() >= self._limit
            ):
                self._cond.wait(1.0)  # external work and the pause are re-read each second
            if self._closed:
                return False
            self._in_use += 1
            return True

    def occupy(self) -> None:
        """Take a slot without waiting, whatever the limit: for work already running that this
        manager takes over (`manager.runtime.adoption`). The caller's duty: `release()` it."""
        with self._cond:
            self._in_use += 1

    def try_acquire(self) -> bool:
        """Take a free slot if there is one now (not closed, not paused, room): True; else
        False at once. The caller's duty, as for `acquire`: `release()` it."""
        with self._cond:
            if self._closed or self._paused() or self._in_use + self._external() >= self._limit:
                return False
            self._in_use += 1
            return True

    def wait(self, seconds: float) -> None:
        """Wait until a slot is given back (or anything else changes), at most `seconds`."""
        with self._cond:
            self._cond.wait(seconds)

    def keep(self) -> bool:
        """For the holder of a slot whose unit of work just ended, about to start the next: keep
        the slot (True) when the limit still allows it - not closed, not paused, no more in use
        than the limit - else give it back (False: `acquire` waits for one as usual). It saves
        a release and an acquire, and a wake-up of another thread, per item."""
        with self._cond:
            if (
                not self._closed
                and not self._paused()
                and self._in_use + self._external() <= self._limit
            ):
                return True
            self._in_use -= 1
            self._cond.notify()
            return False

    def free(self) -> int:
        """Slots free now beyond those taken (0 while closed or paused): how many items a
        taker may reserve at once for the slots about to be taken (a shared ledger's claim
        in one statement). A count, not a promise: `acquire` still decides."""
        with self._cond:
            if self._closed or self._paused():
                return 0
            return max(0, self._limit - self._in_use - self._external())

    def release(self) -> None:
        with self._cond:
            self._in_use -= 1
            self._cond.notify()

    def poke(self) -> None:
        """Something outside changed: waiters re-count."""
        with self._cond:
            self._cond.notify_all()

    def close(self) -> None:
        """Wake every waiter with False; slots already taken stay taken until released."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
