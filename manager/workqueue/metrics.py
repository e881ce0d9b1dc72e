"""Queue metrics under client-go's names, exported through prometheus-client.

Design: the queue records into its `QueueMetrics` with the queue's lock already held, so the
per-queue state here is plain Python (ints, dicts, bucket lists) guarded by that lock; no second
lock and no prometheus object is touched on the hot path. A `Collector` registered once
per provider turns that state into metric families only when Prometheus scrapes. Values that are
about "now" (unfinished work, longest-running processor) are computed at scrape time from the
processing start times, which replaces client-go's periodic updater goroutine.

Without a provider the queue holds `None` instead of a `QueueMetrics` and skips every call:
metrics then cost nothing measurable (bench/workqueue.py shows the difference).

Names, all labelled by `name` (the queue's name):
  workqueue_depth, workqueue_adds_total, workqueue_queue_duration_seconds,
  workqueue_work_duration_seconds, workqueue_unfinished_work_seconds,
  workqueue_longest_running_processor_seconds, workqueue_retries_total
"""

from __future__ import annotations

import threading
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

# client-go: prometheus.ExponentialBuckets(10e-9, 10, 10) -> 1e-8 s .. 10 s
DURATION_BUCKETS: tuple[float, ...] = tuple(10.0**e for e in range(-8, 2))


def _cumulative(counts: list[int]) -> list[tuple[str, int]]:
    out, running = [], 0
    for bound, count in zip((*DURATION_BUCKETS, float("inf")), counts, strict=True):
        running += count
        out.append(("+Inf" if bound == float("inf") else repr(bound), running))
    return out


class QueueMetrics:
    """One queue's metric state, written by the queue with its lock held.

    The queue records inline (queue.py, `_metrics` branches) because these lines run on every
    item and a method call would cost a third of the whole metrics budget; what is recorded, and
    how, is defined here:
      add (key becomes dirty):  add_times[key] = now
      get:                      processing_starts[key] = now; observe now - add_times.pop(key)
                                into queue_counts / queue_sum
      done:                     observe now - processing_starts.pop(key) into work_counts / sum
      add_after:                retries += 1
    Histogram counts are per bucket (not cumulative), index = bisect_left(DURATION_BUCKETS, v).

    Invariants: `add_times` holds exactly the dirty keys not yet handed out again, so its size
    *is* the depth; adds = handed out (sum of queue_counts) + still waiting; `processing_starts`
    holds exactly the keys a worker holds. Nothing is counted twice on the hot path.
    """

    def __init__(self, name: str, clock: Any) -> None:
        self.name = name
        self.now = clock.now
        self.retries = 0
        self.add_times: dict[Any, float] = {}
        self.processing_starts: dict[Any, float] = {}
        self.queue_counts = [0] * (len(DURATION_BUCKETS) + 1)  # last slot is +Inf
        self.queue_sum = 0.0
        self.work_counts = [0] * (len(DURATION_BUCKETS) + 1)
        self.work_sum = 0.0

    @property
    def depth(self) -> int:
        return len(self.add_times)

    @property
    def adds(self) -> int:
        return sum(self.queue_counts) + len(self.add_times)

    def unfinished_work_seconds(self) -> float:
        now = self.now()
        return sum(now - t for t in list(self.processing_starts.values()))

    def longest_running_processor_seconds(self) -> float:
        starts = list(self.processing_starts.values())
        return self.now() - min(starts) if starts else 0.0


class _Collector:
    """Renders every live `QueueMetrics` of one provider at scrape time."""

    def __init__(self) -> None:
        self.queues: list[QueueMetrics] = []
        self.lock = threading.Lock()

    def collect(self):
        with self.lock:
            queues = list(self.queues)
        depth = GaugeMetricFamily("workqueue_depth", "Current depth of workqueue", labels=["name"])
        adds = CounterMetricFamily(
            "workqueue_adds", "Total number of adds handled by workqueue", labels=["name"]
        )
        qdur = HistogramMetricFamily(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested.",
            labels=["name"],
        )
        wdur = HistogramMetricFamily(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes.",
            labels=["name"],
        )
        unfinished = GaugeMetricFamily(
            "workqueue_unfinished_work_seconds",
            "Seconds of work in progress that has not been observed by work_duration.",
            labels=["name"],
        )
        longest = GaugeMetricFamily(
            "workqueue_longest_running_processor_seconds",
            "Seconds the longest running processor for workqueue has been running.",
            labels=["name"],
        )
        retries = CounterMetricFamily(
            "workqueue_retries", "Total number of retries handled by workqueue", labels=["name"]
        )
        for q in queues:
            label = [q.name]
            depth.add_metric(label, q.depth)
            adds.add_metric(label, q.adds)
            qdur.add_metric(label, _cumulative(list(q.queue_counts)), q.queue_sum)
            wdur.add_metric(label, _cumulative(list(q.work_counts)), q.work_sum)
            unfinished.add_metric(label, q.unfinished_work_seconds())
            longest.add_metric(label, q.longest_running_processor_seconds())
            retries.add_metric(label, q.retries)
        yield from (depth, adds, qdur, wdur, unfinished, longest, retries)


class PrometheusMetricsProvider:
    """Gives each queue its `QueueMetrics` and exports them all from one registry.

    Make one provider per registry (`default_metrics_provider()` for the global one); a second
    provider on the same registry would register the same metric names twice.
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else REGISTRY
        self._collector = _Collector()
        self.registry.register(self._collector)

    def new_queue_metrics(self, name: str, clock: Any) -> QueueMetrics:
        metrics = QueueMetrics(name, clock)
        with self._collector.lock:
            self._collector.queues.append(metrics)
        return metrics


_default_provider: PrometheusMetricsProvider | None = None
_default_lock = threading.Lock()


def default_metrics_provider() -> PrometheusMetricsProvider:
    """The provider bound to prometheus-client's global registry (created once)."""
    global _default_provider
    with _default_lock:
        if _default_provider is None:
            _default_provider = PrometheusMetricsProvider()
        return _default_provider
