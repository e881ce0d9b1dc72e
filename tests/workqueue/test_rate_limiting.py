"""RateLimitingQueue: client-go's worker pattern, with time stepped on a fake clock."""

from __future__ import annotations

from kube_workqueue.manager.workqueue import (
    Event,
    FakeClock,
    ItemExponentialFailureRateLimiter,
    RateLimitingQueue,
)

from .helpers import eventually


def test_a_failed_key_comes_back_after_its_backoff_and_forget_resets_it():
    clock = FakeClock()
    q = RateLimitingQueue(rate_limiter=ItemExponentialFailureRateLimiter(1, 60), clock=clock)
    q.add("k")
    key, _ = q.get()
    assert q.add_rate_limited(key) == 1
    q.done(key)
    assert len(q) == 0
    clock.step(1)
    eventually(lambda: len(q) == 1)
    key, _ = q.get()
    assert q.add_rate_limited(key) == 2
    assert q.num_requeues(key) == 2
    q.done(key)
    clock.step(2)
    eventually(lambda: len(q) == 1)
    key, _ = q.get()
    q.forget(key)
    q.done(key)
    assert q.num_requeues("k") == 0
    q.shut_down()


def test_default_limiter_uses_the_queue_clock():
    clock = FakeClock()
    q = RateLimitingQueue(clock=clock)
    assert q.add_rate_limited("k") == 0.005
    clock.step(0.005)
    eventually(lambda: len(q) == 1)
    q.shut_down()


def test_rate_limited_event_reports_attempt_and_backoff():
    seen = []
    clock = FakeClock()
    q = RateLimitingQueue(
        rate_limiter=ItemExponentialFailureRateLimiter(0.005, 1),
        clock=clock,
        observer=lambda e, k, d: seen.append((e, k, d)),
    )
    q.add_rate_limited("k")
    q.add_rate_limited("k")
    limited = [d for e, _, d in seen if e == Event.RATE_LIMITED]
    assert limited == [{"attempt": 1, "backoff": 0.005}, {"attempt": 2, "backoff": 0.01}]
    q.shut_down()
