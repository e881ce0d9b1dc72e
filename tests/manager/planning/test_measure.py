"""One definition of measured times: the same samples give the same figures whether they come
from ledger rows or from a running manager's window, bursts included."""

from __future__ import annotations

import math

import pytest

from kube_workqueue.manager.planning.measure import SlidingWindow, measure, measure_rows
from kube_workqueue.manager.ports import Row


def row(name, seen, took):
    return Row(name, "succeeded", 1, seen, seen + 1, seen + 1 + took, 0, None, None)


class Clock:
    def __init__(self, now=0.0):
        self.now = now

    def __call__(self):
        return self.now


def test_steady_arrivals_give_the_mean_gap_and_its_cv():
    figures = measure([0, 10, 20, 30], [2, 4])
    assert figures.interarrival_seconds == pytest.approx(10)
    assert figures.cv_interarrival == pytest.approx(0)
    assert figures.service_seconds == pytest.approx(3)
    assert not figures.burst


def test_a_burst_has_no_rate_whoever_measures_it():
    arrivals = [100.0 + 0.01 * i for i in range(10)]
    from_rows = measure_rows(row(str(i), t, 2.0) for i, t in enumerate(arrivals))
    clock = Clock(100.0)
    window = SlidingWindow(600.0, clock)
    for t in arrivals:
        window.arrived(1, t)
    window.served(2.0, 103.0)
    clock.now = 110.0
    from_window = window.measured()
    for figures in (from_rows, from_window):
        assert figures.burst and figures.arrivals == 10
        assert math.isinf(figures.interarrival_seconds)
        assert figures.service_seconds == pytest.approx(2.0)


def test_rows_and_window_agree_on_a_steady_stream():
    arrivals = [1000.0 + 5 * i for i in range(20)]
    from_rows = measure_rows(row(str(i), t, 1.0) for i, t in enumerate(arrivals))
    clock = Clock(1000.0)
    window = SlidingWindow(600.0, clock)
    for t in arrivals:
        window.arrived(1, t)
        window.served(1.0, t + 2)
    clock.now = arrivals[-1] + 3
    from_window = window.measured()
    assert from_window.interarrival_seconds == pytest.approx(from_rows.interarrival_seconds)
    assert from_window.service_seconds == pytest.approx(from_rows.service_seconds)


def test_a_window_keeps_only_recent_rows():
    rows = [row(f"old{i}", 1_000.0 + 100 * i, 1.0) for i in range(5)]
    rows += [row(f"new{i}", 100_000.0 + 5 * i, 1.0) for i in range(5)]
    figures = measure_rows(rows, window=600.0)
    assert figures.arrivals == 5 and figures.interarrival_seconds == pytest.approx(5)


def test_json_has_no_infinity():
    assert measure([1.0], []).as_json()["interarrival_seconds"] is None
