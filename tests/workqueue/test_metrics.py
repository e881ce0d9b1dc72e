"""Metrics under client-go's names, read back from a real prometheus-client registry."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from kube_workqueue.manager.workqueue import (
    FakeClock,
    PrometheusMetricsProvider,
    Queue,
    RateLimitingQueue,
)


def value(registry, name, labels=None):
    return registry.get_sample_value(name, labels or {"name": "thumbs"})


def test_depth_adds_durations_and_retries_follow_the_queue():
    registry = CollectorRegistry()
    clock = FakeClock()
    provider = PrometheusMetricsProvider(registry)
    q = RateLimitingQueue("thumbs", clock=clock, metrics_provider=provider)
    q.add("a")
    q.add("a")  # dedup: not an add
    q.add("b")
    assert value(registry, "workqueue_depth") == 2
    assert value(registry, "workqueue_adds_total") == 2
    clock.step(2)
    key, _ = q.get()
    assert value(registry, "workqueue_depth") == 1
    assert value(registry, "workqueue_queue_duration_seconds_count") == 1
    assert value(registry, "workqueue_queue_duration_seconds_sum") == pytest.approx(2)
    clock.step(3)
    assert value(registry, "workqueue_unfinished_work_seconds") == pytest.approx(3)
    assert value(registry, "workqueue_longest_running_processor_seconds") == pytest.approx(3)
    q.done(key)
    assert value(registry, "workqueue_work_duration_seconds_sum") == pytest.approx(3)
    assert value(registry, "workqueue_unfinished_work_seconds") == 0
    # 3 s lands in the 10 s bucket, not the 1 s one
    bucket = {"name": "thumbs", "le": "1.0"}
    assert value(registry, "workqueue_work_duration_seconds_bucket", bucket) == 0
    bucket["le"] = "10.0"
    assert value(registry, "workqueue_work_duration_seconds_bucket", bucket) == 1
    q.add_rate_limited("a")
    assert value(registry, "workqueue_retries_total") == 1
    q.shut_down()


def test_durations_folded_in_batches_read_as_counted_one_by_one():
    """Past FOLD_AT items the queue folds its pending durations into the buckets without a
    scrape; a duration exactly on a bound counts in that bound's bucket (`le`), as before."""
    from bisect import bisect_left

    from kube_workqueue.manager.workqueue.metrics import DURATION_BUCKETS, FOLD_AT

    registry = CollectorRegistry()
    clock = FakeClock()
    q = Queue("thumbs", clock=clock, metrics_provider=PrometheusMetricsProvider(registry))
    steps = [DURATION_BUCKETS[i % len(DURATION_BUCKETS)] * (1, 0.5, 3)[i % 3]
             for i in range(FOLD_AT + 500)]  # fmt: skip
    expected = [0] * (len(DURATION_BUCKETS) + 1)
    for i, step in enumerate(steps):
        q.add(i)
        key, _ = q.get()
        started = clock.now()
        clock.step(step)
        q.done(key)
        expected[bisect_left(DURATION_BUCKETS, clock.now() - started)] += 1  # as the clock says
    assert len(q._metrics.works) < FOLD_AT  # folded along the way, not only when scraped
    running = 0
    for bound, count in zip(DURATION_BUCKETS, expected, strict=False):
        running += count
        labels = {"name": "thumbs", "le": repr(bound)}
        assert value(registry, "workqueue_work_duration_seconds_bucket", labels) == running
    assert value(registry, "workqueue_work_duration_seconds_count") == len(steps)
    assert value(registry, "workqueue_work_duration_seconds_sum") == pytest.approx(sum(steps))
    assert value(registry, "workqueue_queue_duration_seconds_count") == len(steps)
    q.shut_down()


def test_every_client_go_name_is_exported_and_labelled_by_queue():
    registry = CollectorRegistry()
    provider = PrometheusMetricsProvider(registry)
    queues = [Queue("one", metrics_provider=provider), Queue("two", metrics_provider=provider)]
    text = generate_latest(registry).decode()
    for name in [
        "workqueue_depth",
        "workqueue_adds_total",
        "workqueue_queue_duration_seconds_bucket",
        "workqueue_work_duration_seconds_bucket",
        "workqueue_unfinished_work_seconds",
        "workqueue_longest_running_processor_seconds",
        "workqueue_retries_total",
    ]:
        lines = [line for line in text.splitlines() if line.startswith(name + "{")]
        assert any('name="one"' in line for line in lines), name
        assert any('name="two"' in line for line in lines), name
    del queues


def test_a_dropped_queue_leaves_the_export():
    import gc

    registry = CollectorRegistry()
    provider = PrometheusMetricsProvider(registry)
    q = Queue("gone", metrics_provider=provider)
    assert registry.get_sample_value("workqueue_depth", {"name": "gone"}) == 0
    del q
    gc.collect()
    assert registry.get_sample_value("workqueue_depth", {"name": "gone"}) is None


def test_without_a_provider_no_metric_state_is_kept():
    q = Queue("quiet")
    q.add("a")
    assert q._metrics is None
