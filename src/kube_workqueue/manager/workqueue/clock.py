"""Clocks: the one place the workqueue reads time or waits for it.

Every queue and limiter takes a `clock`. Production code uses `RealClock` (monotonic seconds);
tests use `FakeClock`, whose time moves only when the test calls `step()`, so backoffs and delays
are checked exactly and no test sleeps for them.

Waiting is part of the clock because a delayed add must wake when *the clock* reaches a deadline,
not when wall time does. `wait(cond, deadline)` is always called with `cond` held, like
`Condition.wait`; it may return early (spuriously), so callers re-check their state in a loop.
"""

from __future__ import annotations

import threading
import time
import weakref


class RealClock:
    """Monotonic time; waits use the condition's own timeout."""

    # The builtin itself, not a method wrapping it: metrics read the clock on the hot path.
    now = staticmethod(time.monotonic)

    def wait(self, cond: threading.Condition, deadline: float | None) -> None:
        """Wait on `cond` (held by the caller) until notified or `deadline` passes."""
        if deadline is None:
            cond.wait()
        else:
            cond.wait(max(0.0, deadline - time.monotonic()))


class FakeClock:
    """A clock that moves only when told to.

    Invariant: every condition that has waited on this clock is in `_waiters`, so `step()` can
    wake it; a waiter registers *before* it compares the time, under its own lock, and `step()`
    notifies under that same lock, so no wake-up falls between the check and the wait.
    """

    def __init__(self, start: float = 1000.0) -> None:
        self._now = start
        self._lock = threading.Lock()
        self._waiters: weakref.WeakSet[threading.Condition] = weakref.WeakSet()

    def now(self) -> float:
        return self._now

    def wait(self, cond: threading.Condition, deadline: float | None) -> None:
        with self._lock:
            self._waiters.add(cond)
        if deadline is not None and deadline <= self._now:
            return
        # Real time bounds the wait only so a forgotten step() cannot hang a test forever.
        cond.wait(1.0)

    def step(self, seconds: float) -> None:
        """Advance time by `seconds` and wake everything waiting on this clock."""
        with self._lock:
            self._now += seconds
            waiters = list(self._waiters)
        for cond in waiters:
            with cond:
                cond.notify_all()

    def set(self, when: float) -> None:
        """Move time to `when` (never backwards)."""
        self.step(max(0.0, when - self._now))
