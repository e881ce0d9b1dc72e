"""The manager applies the stability rule to itself: parallelism follows the recommendation.

Every `interval` seconds it reads the measured interarrival and service times over a sliding
window, asks `scaling.recommended_parallelism` for the smallest P that keeps utilization at or
under the target, clamps it to [min, max], and then:
  * up at once - a queue that is falling behind only falls further;
  * down only when every recommendation over the last `down_delay` seconds was lower, and then
    to the highest of them - a dip in arrivals must last before workers are given up, and one
    quiet interval never undoes the last scale-up (no flapping).
With no finished work yet there is no service time, so nothing changes. When the window holds
a burst (items that arrived together: a backlog, not a rate - `manager.planning.measure`), the
recommendation is one worker per item still waiting or running, so the backlog drains as fast as
the bounds allow.

Each change is logged with its reason, e.g. "utilization 0.97 > 0.9 at P=3 -> P=4", and kept
in `decisions` (the dashboard's table). What it reads is on /metrics too (`manager.views.observe`:
workqueue_parallelism, workqueue_utilization_ratio, workqueue_interarrival_seconds,
workqueue_service_seconds), computed from the same window.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable

from ..planning.measure import Measured
from ..planning.scaling import recommended_parallelism

log = logging.getLogger(__name__)


class Autoscaler:
    def __init__(
        self,
        set_parallelism: Callable[[int], None],
        current: int,
        measured: Callable[[], Measured],
        clock: Callable[[], float],
        *,
        backlog: Callable[[], int] = lambda: 0,
        minimum: int,
        maximum: int,
        interval: float = 30.0,
        down_delay: float = 300.0,
        target_utilization: float = 0.9,
    ) -> None:
        if not 1 <= minimum <= maximum:
            raise ValueError("need 1 <= min-parallelism <= max-parallelism")
        self.set_parallelism = set_parallelism
        self.current = min(max(current, minimum), maximum)
        self.measured = measured  # the figures over the window ending now
        self.backlog = backlog  # items waiting or running now
        self.clock = clock
        self.minimum, self.maximum = minimum, maximum
        self.interval = interval
        self.down_delay = down_delay
        self.target = target_utilization
        # Invariant: (time, clamped recommendation) of every step within the last down_delay.
        self._history: deque[tuple[float, int]] = deque()
        self.last_reason: str | None = None
        # The latest changes, newest last: (wall-clock time, from, to, reason) - the dashboard.
        self.decisions: deque[tuple[float, int, int, str]] = deque(maxlen=20)
        if self.current != current:
            set_parallelism(self.current)

    def step(self) -> int:
        """One decision; returns the parallelism now in force."""
        now = self.clock()
        figures = self.measured()
        interarrival, service = figures.interarrival_seconds, figures.service_seconds
        if service is None:
            return self.current
        utilization = 0.0 if math.isinf(interarrival) else service / (self.current * interarrival)
        if figures.burst:
            wanted = max(1, self.backlog())
        else:
            wanted = recommended_parallelism(interarrival, service, self.target)
        clamped = min(max(wanted, self.minimum), self.maximum)
        self._history.append((now, clamped))
        while self._history and self._history[0][0] < now - self.down_delay:
            self._history.popleft()
        if clamped > self.current:
            self._change(
                clamped,
                f"utilization {utilization:.2f} > {self.target:g} at "
                f"P={self.current} -> P={clamped}",
            )
        elif clamped < self.current and self._held_low(now):
            target = max(p for _, p in self._history)
            if target < self.current:
                self._change(
                    target,
                    f"utilization {utilization:.2f} < {self.target:g} at "
                    f"P={self.current} for {self.down_delay:g}s -> P={target}",
                )
        return self.current

    def _held_low(self, now: float) -> bool:
        """True when the history covers the whole delay and every entry in it was lower."""
        if not self._history or self._history[0][0] > now - self.down_delay + self.interval:
            return False
        return all(p < self.current for _, p in self._history)

    def _change(self, parallelism: int, reason: str) -> None:
        log.info("autoscale: %s", reason)
        self.last_reason = reason
        self.decisions.append((time.time(), self.current, parallelism, reason))
        self.current = parallelism
        self.set_parallelism(parallelism)

    def run(self, stop: threading.Event) -> None:
        while not stop.wait(self.interval):
            try:
                self.step()
            except Exception:
                log.exception("autoscale step failed")
