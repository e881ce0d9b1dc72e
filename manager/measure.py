"""Measured arrival and service times of items, from the local ledger.

Interarrival: gaps between the first-seen times of items, in arrival order. Service: finished -
started of items that ran to an end (queue wait excluded, as shared/seeds/002 defines it). Each
comes with its coefficient of variation (stdev / mean), which says how far the measurements are
from the exponential times the M/M/c model assumes (cv = 1 for exponential; 0 for clockwork).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass

from .ledger import Ledger, Row

# Items first seen within this many seconds of each other arrived "together" (one listing).
BURST_SECONDS = 1.0


@dataclass(frozen=True)
class Measured:
    items: int
    services: int
    mean_interarrival: float | None
    cv_interarrival: float | None
    mean_service: float | None
    cv_service: float | None
    burst: bool  # every item (or the only one) arrived together: no rate to speak of

    def describe(self) -> str:
        parts = []
        if self.mean_service is not None:
            cv = f" (cv {self.cv_service:.2f})" if self.cv_service is not None else ""
            parts.append(
                f"mean service time {self.mean_service:.2f}s over {self.services} run(s){cv}"
            )
        if self.burst:
            together = (
                "the only item" if self.items == 1 else f"all {self.items} items arrived together"
            )
            parts.append(f"mean interarrival 0.00s: {together} (a backlog to drain, not a rate)")
        elif self.mean_interarrival is not None:
            cv = f" (cv {self.cv_interarrival:.2f})" if self.cv_interarrival is not None else ""
            parts.append(f"mean interarrival {self.mean_interarrival:.2f}s{cv}")
        return "measured: " + "; ".join(parts) if parts else "measured: nothing finished yet"


def coefficient_of_variation(values: list[float]) -> float | None:
    """stdev / mean; None for fewer than two values or a zero mean."""
    if len(values) < 2:
        return None
    mean = statistics.fmean(values)
    return statistics.pstdev(values) / mean if mean > 0 else None


def arrival_gaps(arrival_times: Iterable[float]) -> tuple[list[float], bool]:
    """The gaps between arrivals in time order, and whether they all came together (within
    BURST_SECONDS of each other: a backlog, not a rate; a single arrival counts as one)."""
    arrivals = sorted(arrival_times)
    gaps = [b - a for a, b in zip(arrivals, arrivals[1:], strict=False)]
    return gaps, bool(arrivals) and arrivals[-1] - arrivals[0] <= BURST_SECONDS


def measure_rows(rows: Iterable[Row]) -> Measured | None:
    rows = list(rows)
    if not rows:
        return None
    gaps, burst = arrival_gaps(r.first_seen for r in rows)
    services = [
        r.finished - r.started
        for r in rows
        if r.started is not None and r.finished is not None and r.finished >= r.started
    ]
    return Measured(
        items=len(rows),
        services=len(services),
        mean_interarrival=statistics.fmean(gaps) if gaps else None,
        cv_interarrival=coefficient_of_variation(gaps),
        mean_service=statistics.fmean(services) if services else None,
        cv_service=coefficient_of_variation(services),
        burst=burst,
    )


def measure_run(ledger: Ledger, names: list[str]) -> Measured | None:
    wanted = set(names)
    return measure_rows(r for r in ledger.rows() if r.name in wanted)


class SlidingWindow:
    """Arrivals and service times of the last `window` seconds, kept by a running manager.

    The manager calls `arrived(t)` for each new item and `served(seconds, t)` for each unit of
    work that ran to an end; readers get the figures over the window ending now. Thread-safe.
    Invariant: the deques hold only events newer than now - window once `_prune` has run, in
    time order.
    """

    def __init__(self, window: float, clock) -> None:
        import threading
        from collections import deque

        self.window = window
        self.clock = clock
        self.started = clock()
        self._lock = threading.Lock()
        self._arrivals: deque[float] = deque()
        self._services: deque[tuple[float, float]] = deque()

    def arrived(self, count: int = 1, when: float | None = None) -> None:
        when = self.clock() if when is None else when
        with self._lock:
            self._arrivals.extend([when] * count)

    def served(self, seconds: float, when: float | None = None) -> None:
        when = self.clock() if when is None else when
        with self._lock:
            self._services.append((when, seconds))

    def _prune(self, now: float) -> None:
        cutoff = now - self.window
        while self._arrivals and self._arrivals[0] < cutoff:
            self._arrivals.popleft()
        while self._services and self._services[0][0] < cutoff:
            self._services.popleft()

    def snapshot(self) -> dict:
        """{"span", "arrival_times", "service_seconds"} over the window ending now; `span` is
        the window, or the time since start when that is shorter."""
        now = self.clock()
        with self._lock:
            self._prune(now)
            return {
                "span": min(self.window, now - self.started),
                "arrival_times": list(self._arrivals),
                "service_seconds": [s for _, s in self._services],
            }

    def rates(self) -> tuple[float | None, float | None]:
        """(mean interarrival, mean service) over the window: interarrival = span / arrivals
        (infinite with none), service None until some work has finished."""
        snap = self.snapshot()
        arrivals, services, span = snap["arrival_times"], snap["service_seconds"], snap["span"]
        interarrival = span / len(arrivals) if arrivals and span > 0 else math.inf
        return interarrival, (statistics.fmean(services) if services else None)
