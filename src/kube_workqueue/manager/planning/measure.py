"""Measured arrival and service times: the one definition every reader uses.

The stability calculator (`--from-state`, `--from-url`), the autoscaler and the summary of a
`--once` run all turn raw samples into figures here, so they agree, bursts included:

  * **interarrival**: the mean gap between consecutive arrivals, in time order. When every
    arrival came within `BURST_SECONDS` of the first (one listing's worth, or a single item),
    there is no rate to speak of: `burst` is set, the interarrival is infinite and the items
    are a backlog of `arrivals` to drain.
  * **service**: the mean run time of units of work that ran to an end (queue wait excluded,
    as Burns' work-queue chapter defines it).

Each figure comes with its coefficient of variation (stdev / mean), which says how far the
samples are from the exponential times M/M/c assumes (cv 1 for exponential, 0 for clockwork).

`SlidingWindow` keeps a running manager's samples over the last `window` seconds; `rows()`
turns ledger rows into samples.
"""

from __future__ import annotations

import math
import statistics
import threading
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ..ports import Row

# Items first seen within this many seconds of each other arrived "together" (one listing).
BURST_SECONDS = 1.0


@dataclass(frozen=True)
class Measured:
    arrivals: int
    services: int
    interarrival_seconds: float  # math.inf when there is no rate (a burst, or no arrivals)
    cv_interarrival: float | None
    service_seconds: float | None  # None until some unit of work has finished
    cv_service: float | None
    burst: bool  # every item (or the only one) arrived together: a backlog, not a rate
    window_seconds: float | None = None  # the span the samples cover, when it is known

    def as_json(self) -> dict:
        """JSON-safe figures (an infinite interarrival is null)."""
        return {
            "arrivals": self.arrivals,
            "interarrival_seconds": _finite(self.interarrival_seconds),
            "cv_interarrival": self.cv_interarrival,
            "services": self.services,
            "service_seconds": self.service_seconds,
            "cv_service": self.cv_service,
            "burst": self.burst,
            "window_seconds": self.window_seconds,
        }

    def describe(self) -> str:
        """One line for people: `measured: mean service time …; mean interarrival …`."""
        parts = []
        if self.service_seconds is not None:
            cv = f" (cv {self.cv_service:.2f})" if self.cv_service is not None else ""
            parts.append(
                f"mean service time {self.service_seconds:.2f}s over {self.services} run(s){cv}"
            )
        if self.burst:
            together = (
                "the only item"
                if self.arrivals == 1
                else f"all {self.arrivals} items arrived together"
            )
            parts.append(f"mean interarrival 0.00s: {together} (a backlog to drain, not a rate)")
        elif math.isfinite(self.interarrival_seconds):
            cv = f" (cv {self.cv_interarrival:.2f})" if self.cv_interarrival is not None else ""
            parts.append(f"mean interarrival {self.interarrival_seconds:.2f}s{cv}")
        return "measured: " + "; ".join(parts) if parts else "measured: nothing finished yet"


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def coefficient_of_variation(values: list[float]) -> float | None:
    """stdev / mean; None for fewer than two values or a zero mean."""
    if len(values) < 2:
        return None
    mean = statistics.fmean(values)
    return statistics.pstdev(values) / mean if mean > 0 else None


def measure(
    arrival_times: Iterable[float],
    service_seconds: Iterable[float],
    *,
    window_seconds: float | None = None,
) -> Measured:
    """The figures of a set of samples (see the module docstring for the definitions)."""
    arrivals = sorted(arrival_times)
    services = list(service_seconds)
    gaps = [b - a for a, b in zip(arrivals, arrivals[1:], strict=False)]
    burst = bool(arrivals) and arrivals[-1] - arrivals[0] <= BURST_SECONDS
    return Measured(
        arrivals=len(arrivals),
        services=len(services),
        interarrival_seconds=math.inf if burst or not gaps else statistics.fmean(gaps),
        cv_interarrival=None if burst else coefficient_of_variation(gaps),
        service_seconds=statistics.fmean(services) if services else None,
        cv_service=coefficient_of_variation(services),
        burst=burst,
        window_seconds=window_seconds,
    )


def service_times(rows: Iterable[Row], since: float = -math.inf) -> list[float]:
    """The run time of every unit of work that ran to an end (finished at or after `since`):
    a cancelled item's run was cut short, and is no service time. The one definition every
    service-time figure uses (`stability`, `simulate`, `plan`, the forecast)."""
    return [
        r.finished - r.started
        for r in rows
        if r.started is not None
        and r.finished is not None
        and r.state != "cancelled"
        and r.finished >= r.started
        and r.finished >= since
    ]


def measure_rows(
    rows: Iterable[Row], *, window: float | None = None, arrivals_known: bool = True
) -> Measured | None:
    """The figures of ledger rows; with `window`, only the `window` seconds ending at the
    newest event (first seen or finished) count, so a ledger read long after a run still
    describes that run. Where first-seen times are not arrivals (`arrivals_known` False: a
    Kubernetes record, whose Jobs are made at dispatch), only service times are measured.
    None for no rows."""
    rows = list(rows)
    if not rows:
        return None
    start = -math.inf
    if window is not None:
        end = max(max(r.first_seen for r in rows), max((r.finished or 0.0) for r in rows))
        start = end - window
    arrivals = [r.first_seen for r in rows if r.first_seen >= start] if arrivals_known else []
    return measure(arrivals, service_times(rows, start), window_seconds=window)


class SlidingWindow:
    """Arrivals and service times of the last `window` seconds, kept by a running manager.

    The manager calls `arrived(count)` for new items and `served(seconds)` for each unit of
    work that ran to an end; readers get `measured()` (the figures) or `snapshot()` (the raw
    samples, served at `/stats`) over the window ending now. Thread-safe.
    """

    def __init__(self, window: float, clock: Callable[[], float]) -> None:
        self.window = window
        self.clock = clock
        self.started = clock()
        self._lock = threading.Lock()
        # Invariant: after _prune(now), both hold only events newer than now - window, in
        # time order (appends come from the same clock).
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

    def measured(self) -> Measured:
        snap = self.snapshot()
        return measure(snap["arrival_times"], snap["service_seconds"], window_seconds=snap["span"])
