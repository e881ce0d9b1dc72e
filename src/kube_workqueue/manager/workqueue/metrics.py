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

import math
import threading
import weakref
from bisect import bisect_right
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported when metrics are made: a queue without them never loads it
    from prometheus_client import CollectorRegistry

# client-go: prometheus.ExponentialBuckets(10e-9, 10, 10) -> 1e-8 s .. 10 s
DURATION_BUCKETS: tuple[float, ...] = tuple(10.0**e for e in range(-8, 2))


FOLD_AT = 4096  # pending work durations before they are put into buckets (see QueueMetrics)


def _into_buckets(pending: list[float], counts: list[int]) -> float:
    """Count each of `pending` into `counts` (bucket i: DURATION_BUCKETS[i-1] < v <= bound i,
    the last +Inf), empty it in place, and return its sum."""
    if not pending:
        return 0.0
    pending.sort()
    below = 0
    for i, bound in enumerate(DURATION_BUCKETS):
        upto = bisect_right(pending, bound)
        counts[i] += upto - below
        below = upto
    counts[-1] += len(pending) - below
    total = math.fsum(pending)
    pending.clear()
    return total


def _cumulative(counts: list[int]) -> list[tuple[str, int]]:
    out, running = [], 0
    for bound, count in zip((*DURATION_BUCKETS, float("inf")), counts, strict=True):
        running += count
        out.append(("+Inf" if bound == float("inf") else repr(bound), running))
    return out


class QueueMetrics:
    """One queue's metric state, written by the queue with its lock held.

    The queue records inline (queue.py, the `metrics` branches) because those lines run on every
    item and a method call would cost a third of the metrics budget. What it records:
      add (key becomes dirty):  _dirty[key] = now           (the dirty table is the add-time map)
      get:                      _processing[key] = now; waits.append(now - added)
      done:                     works.append(now - started); past `FOLD_AT` of them, fold()
      add_after:                retries += 1
    A duration is put into its bucket later, many at once (`fold`: the pending durations sorted,
    one bisection per bucket bound), not one bisection per item: an append is about a third of
    the cost of placing one value, and the histograms read the same. `waits` never holds more
    than `FOLD_AT` plus the workers' number of durations, since every get() is followed by a
    done() (the queue's caller's duty).

    Invariants: `queue_counts`/`work_counts` are per bucket (not cumulative: index i counts
    DURATION_BUCKETS[i-1] < v <= DURATION_BUCKETS[i], the last +Inf) and, with `queue_sum`
    and `work_sum`, hold every duration observed before the last fold; `waits`/`works` hold the
    ones since (they are emptied in place, so a bound `append` stays valid). Figures are read
    after a fold under the queue's lock (`Queue._metrics_snapshot`).

    Derived at scrape time, so never counted twice on the hot path: depth = len(dirty);
    adds = handed out (sum of queue_counts) + still dirty; unfinished work and the longest
    running processor from the processing table's start times. The queue is held weakly: a
    collector never keeps a finished queue alive.
    """

    # slots: the queue reads these attributes on every item, and slot access is the cheapest
    __slots__ = (
        "name",
        "now",
        "retries",
        "queue_counts",
        "queue_sum",
        "work_counts",
        "work_sum",
        "waits",
        "works",
        "_queue",
    )

    def __init__(self, queue: Any) -> None:
        self.name = queue.name
        self.now = queue.clock.now
        self.retries = 0
        self.queue_counts = [0] * (len(DURATION_BUCKETS) + 1)  # last slot is +Inf
        self.queue_sum = 0.0
        self.work_counts = [0] * (len(DURATION_BUCKETS) + 1)
        self.work_sum = 0.0
        self.waits: list[float] = []
        self.works: list[float] = []
        self._queue = weakref.ref(queue)

    def fold(self) -> None:
        """Put the pending durations into their buckets and sums. The caller holds the queue's
        lock (or the queue is gone: nobody records any more)."""
        self.queue_sum += _into_buckets(self.waits, self.queue_counts)
        self.work_sum += _into_buckets(self.works, self.work_counts)

    def alive(self) -> bool:
        return self._queue() is not None

    def snapshot(self) -> dict[str, Any]:
        """Every figure at this instant (called by the collector, not under the queue's lock)."""
        queue = self._queue()
        if queue is not None:
            depth, starts = queue._metrics_snapshot()  # folds, under the queue's lock
        else:
            self.fold()
            depth, starts = 0, []
        now = self.now()
        return {
            "depth": depth,
            "adds": sum(self.queue_counts) + depth,
            "retries": self.retries,
            "queue": (_cumulative(list(self.queue_counts)), self.queue_sum),
            "work": (_cumulative(list(self.work_counts)), self.work_sum),
            "unfinished": sum(now - t for t in starts),
            "longest": now - min(starts) if starts else 0.0,
        }


class _Collector:
    """Renders every live `QueueMetrics` of one provider at scrape time."""

    def __init__(self) -> None:
        self.queues: list[QueueMetrics] = []
        self.lock = threading.Lock()

    def collect(self):
        from prometheus_client.core import (
            CounterMetricFamily,
            GaugeMetricFamily,
            HistogramMetricFamily,
        )

        with self.lock:
            self.queues = [q for q in self.queues if q.alive()]
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
            label, m = [q.name], q.snapshot()
            depth.add_metric(label, m["depth"])
            adds.add_metric(label, m["adds"])
            qdur.add_metric(label, *m["queue"])
            wdur.add_metric(label, *m["work"])
            unfinished.add_metric(label, m["unfinished"])
            longest.add_metric(label, m["longest"])
            retries.add_metric(label, m["retries"])
        yield from (depth, adds, qdur, wdur, unfinished, longest, retries)


class PrometheusMetricsProvider:
    """Gives each queue its `QueueMetrics` and exports them all from one registry.

    Make one provider per registry (no registry: prometheus-client's global one); a second
    provider on the same registry would register the same metric names twice.
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        if registry is None:
            from prometheus_client import REGISTRY

            registry = REGISTRY
        self.registry = registry
        self._collector = _Collector()
        self.registry.register(self._collector)

    def new_queue_metrics(self, queue: Any) -> QueueMetrics:
        metrics = QueueMetrics(queue)
        with self._collector.lock:
            self._collector.queues.append(metrics)
        return metrics
