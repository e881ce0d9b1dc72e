"""What the dashboard shows, gathered once per refresh from a running manager.

A `Board` is one moment of the queue: the `QueueView` (counts, reasons, positions, ETAs, the
forecast), the last hour per minute (`Series`: items finished, succeeded and failed, and the
p50/p95 of their latency - first seen to finished - and of their run time), the autoscaler's
latest decisions, and the log tails of the newest failed items.

Browsers refresh every second or so, and a page may be open in several; `BoardCache` builds at
most one board per `max_age` seconds, whoever asks, so a dashboard never loads the manager more
than one reader would.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ...log_tails import log_tail
from ..queue_view import ItemView, QueueView

BUCKETS = 60  # bars (and points) per chart
HOUR = 3600.0
SHORTEST_SPAN = 120.0  # a young run's charts cover at least its first two minutes
FAILED_SHOWN = 20
LOG_LINES = 5


@dataclass
class Series:
    """`BUCKETS` equal spans ending now, oldest first; `start` is the first one's start. The
    whole covers the last hour, or - while the manager has run for less - the time since it
    started (at least two minutes), so a new run's charts are not an hour of empty bars."""

    start: float
    succeeded: list[int]
    failed: list[int]
    latency_p50: list[float | None]
    latency_p95: list[float | None]
    run_p95: list[float | None]
    bucket_seconds: float = 60.0

    @property
    def span_seconds(self) -> float:
        return self.bucket_seconds * len(self.succeeded)

    def as_json(self) -> dict:
        return {
            "start": self.start,
            "bucket_seconds": self.bucket_seconds,
            "minute_seconds": self.bucket_seconds,  # the name of earlier versions
            "succeeded": self.succeeded,
            "failed": self.failed,
            "latency_p50_seconds": self.latency_p50,
            "latency_p95_seconds": self.latency_p95,
            "run_p95_seconds": self.run_p95,
        }


@dataclass
class Decision:
    at: float
    before: int
    after: int
    reason: str


@dataclass
class Board:
    view: QueueView
    series: Series
    decisions: list[Decision]
    autoscale: bool
    log_tails: dict[str, list[str]] = field(default_factory=dict)

    def as_json(self) -> dict:
        return {
            **self.view.as_json(),
            "series": self.series.as_json(),
            "autoscaler": {
                "enabled": self.autoscale,
                "decisions": [
                    {"at": d.at, "from": d.before, "to": d.after, "reason": d.reason}
                    for d in self.decisions
                ],
            },
        }


NICE_BUCKETS = (2.0, 5.0, 10.0, 15.0, 20.0, 30.0, 60.0)  # seconds a bar may stand for


def bucket_for(now: float, since: float | None) -> float:
    """The span of one bucket: a minute for the last hour; for a manager that started less
    than an hour ago (`since`), the smallest of `NICE_BUCKETS` that covers its age (at least
    two minutes) in `BUCKETS` bars."""
    if since is None:
        return HOUR / BUCKETS
    span = min(HOUR, max(SHORTEST_SPAN, now - since))
    return next(b for b in NICE_BUCKETS if b * BUCKETS >= span)


def series(items: list[ItemView], now: float, since: float | None = None) -> Series:
    """Finished items per bucket (see `Series`), ending with the bucket that holds `now`."""
    bucket = bucket_for(now, since)
    start = (math.floor(now / bucket) - BUCKETS + 1) * bucket
    succeeded = [0] * BUCKETS
    failed = [0] * BUCKETS
    latencies: list[list[float]] = [[] for _ in range(BUCKETS)]
    runs: list[list[float]] = [[] for _ in range(BUCKETS)]
    for item in items:
        if item.state not in ("succeeded", "failed") or item.since is None:
            continue
        if item.position is not None:  # failed, backing off: not an outcome yet
            continue
        minute = int((item.since - start) // bucket)
        if not 0 <= minute < BUCKETS:
            continue
        (succeeded if item.state == "succeeded" else failed)[minute] += 1
        if item.first_seen:
            latencies[minute].append(max(0.0, item.since - item.first_seen))
        if item.ran_seconds is not None:
            runs[minute].append(item.ran_seconds)
    return Series(
        start=start,
        succeeded=succeeded,
        failed=failed,
        latency_p50=[_quantile(v, 0.5) for v in latencies],
        latency_p95=[_quantile(v, 0.95) for v in latencies],
        run_p95=[_quantile(v, 0.95) for v in runs],
        bucket_seconds=bucket,
    )


def _quantile(values: list[float], q: float) -> float | None:
    """The nearest-rank quantile; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def board(manager, now: float | None = None) -> Board:
    """The board of `manager` (a `manager.runtime.runner.Manager`) now."""
    now = time.time() if now is None else now
    view = manager.asked.view(now)
    autoscaler = manager.autoscaler
    decisions = [Decision(*d) for d in autoscaler.decisions] if autoscaler is not None else []
    failed = [i for i in view.items if i.state == "failed" and i.position is None]
    failed.sort(key=lambda i: i.since or 0, reverse=True)
    tails = {}
    for item in failed[:FAILED_SHOWN]:
        tail = log_tail(item.log, LOG_LINES)
        if tail is not None:
            tails[item.name] = tail
    started = manager.started
    return Board(view, series(view.items, now, started), decisions, autoscaler is not None, tails)


class BoardCache:
    """At most one board per `max_age` seconds (see the module docstring). Thread-safe."""

    def __init__(
        self,
        build: Callable[[], Board],
        max_age: float = 0.5,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.build = build
        self.max_age = max_age
        self.clock = clock
        self._lock = threading.Lock()
        self._board: Board | None = None
        self._built = -math.inf

    def get(self) -> Board:
        with self._lock:
            if self._board is None or self.clock() - self._built >= self.max_age:
                self._board = self.build()
                self._built = self.clock()
            return self._board
