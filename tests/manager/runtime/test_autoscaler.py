"""The autoscaler on a fake clock: up at once, down only after the delay, never out of bounds,
and no flapping through a rising then falling arrival rate."""

from __future__ import annotations

import math

from kube_workqueue.manager.planning.measure import Measured, SlidingWindow
from kube_workqueue.manager.runtime.autoscaler import Autoscaler


def figures(interarrival, service):
    """Measured figures with these means (what the autoscaler reads from its window)."""
    return Measured(1, 1, interarrival, None, service, None, False)


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def drive(rate_per_phase, *, service=10.0, interval=30.0, delay=300.0, lo=1, hi=8):
    """Feed arrivals at each phase's rate (items/s) for 600 s; return the parallelism after
    each autoscaler step."""
    clock = Clock()
    window = SlidingWindow(300.0, clock)
    changes: list[int] = []
    scaler = Autoscaler(
        changes.append,
        1,
        window.measured,
        clock,
        minimum=lo,
        maximum=hi,
        interval=interval,
        down_delay=delay,
    )
    trace = []
    carry = 0.0
    for rate in rate_per_phase:
        for _ in range(int(600 / interval)):
            carry += rate * interval
            n = int(carry)
            carry -= n
            for k in range(n):
                window.arrived(1, clock.now + k * interval / max(n, 1))
                window.served(service, clock.now)
            clock.now += interval
            trace.append(scaler.step())
    return trace, changes, scaler


def test_follows_a_rising_then_falling_rate_without_flapping():
    # service 10 s; rates 0.05/s -> P 1, 0.2/s -> P 3, 0.6/s -> P 7, back down
    trace, changes, _ = drive([0.05, 0.2, 0.6, 0.2, 0.05])
    steps = 20
    assert trace[steps - 1] == 1
    assert trace[2 * steps - 1] == 3
    assert trace[3 * steps - 1] == 7
    assert trace[4 * steps - 1] == 3
    assert trace[5 * steps - 1] == 1
    # monotone in each phase direction: no up-down-up
    reversals = sum(
        1
        for a, b, c in zip(changes, changes[1:], changes[2:], strict=False)
        if (b - a) * (c - b) < 0
    )
    assert reversals <= 1  # the single turn from rising to falling


def test_scales_up_at_once_but_down_only_after_the_delay():
    clock = Clock()
    rates = {"value": (10.0, 30.0)}  # interarrival 10 s, service 30 s -> P 4 at 0.9
    changes = []
    scaler = Autoscaler(
        changes.append,
        1,
        lambda: figures(*rates["value"]),
        clock,
        minimum=1,
        maximum=10,
        interval=30,
        down_delay=300,
    )
    assert scaler.step() == 4 and changes == [4]
    rates["value"] = (100.0, 30.0)  # now P 1 would do
    for _ in range(9):
        clock.now += 30
        assert scaler.step() == 4, "must not scale down before the delay has passed"
    clock.now += 30
    clock.now += 30
    assert scaler.step() == 1
    assert "-> P=1" in scaler.last_reason


def test_a_brief_dip_does_not_scale_down():
    clock = Clock()
    rates = {"value": (10.0, 30.0)}
    scaler = Autoscaler(
        lambda p: None,
        4,
        lambda: figures(*rates["value"]),
        clock,
        minimum=1,
        maximum=10,
        interval=30,
        down_delay=300,
    )
    for i in range(30):
        clock.now += 30
        rates["value"] = (100.0, 30.0) if i % 5 else (10.0, 30.0)  # busy every 5th interval
        assert scaler.step() == 4


def test_bounds_are_respected_and_no_data_means_no_change():
    clock = Clock()
    scaler = Autoscaler(lambda p: None, 2, lambda: figures(1.0, 100.0), clock, minimum=2, maximum=5)
    assert scaler.step() == 5
    idle = Autoscaler(
        lambda p: None, 3, lambda: figures(math.inf, None), clock, minimum=1, maximum=5
    )
    assert idle.step() == 3


def test_reason_is_logged(caplog):
    import logging

    clock = Clock()
    scaler = Autoscaler(lambda p: None, 3, lambda: figures(10.0, 29.1), clock, minimum=1, maximum=9)
    with caplog.at_level(logging.INFO, logger="kube_workqueue.manager"):
        scaler.step()
    assert "utilization 0.97 > 0.9 at P=3 -> P=4" in caplog.text
