"""The limiters, in seconds, on an injected clock."""

from __future__ import annotations

import pytest

from kube_workqueue.manager.workqueue import (
    BucketRateLimiter,
    FakeClock,
    ItemExponentialFailureRateLimiter,
    ItemFastSlowRateLimiter,
    MaxOfRateLimiter,
    default_controller_rate_limiter,
)


def test_exponential_doubles_per_failure_of_the_same_key():
    limiter = ItemExponentialFailureRateLimiter(0.005, 1000)
    assert [limiter.when("k") for _ in range(4)] == [0.005, 0.01, 0.02, 0.04]
    assert limiter.num_requeues("k") == 4


def test_exponential_counts_each_key_on_its_own():
    limiter = ItemExponentialFailureRateLimiter(0.001, 1)
    limiter.when("a")
    limiter.when("a")
    assert limiter.when("b") == 0.001
    assert limiter.num_requeues("a") == 2


def test_exponential_is_capped_and_survives_huge_exponents():
    limiter = ItemExponentialFailureRateLimiter(0.005, 1000)
    delays = [limiter.when("k") for _ in range(2000)]
    assert delays[17] == 655.36
    assert delays[18] == 1000
    assert delays[-1] == 1000


def test_forget_resets_the_backoff():
    limiter = ItemExponentialFailureRateLimiter(0.005, 1000)
    limiter.when("k")
    limiter.when("k")
    limiter.forget("k")
    assert limiter.num_requeues("k") == 0
    assert limiter.when("k") == 0.005


def test_fast_slow_switches_after_the_fast_attempts():
    limiter = ItemFastSlowRateLimiter(0.1, 5, 3)
    assert [limiter.when("k") for _ in range(5)] == [0.1, 0.1, 0.1, 5, 5]
    limiter.forget("k")
    assert limiter.when("k") == 0.1


def test_bucket_has_reservation_semantics():
    limiter = BucketRateLimiter(qps=10, burst=100, clock=FakeClock())
    delays = [limiter.when(i) for i in range(102)]
    assert delays[:100] == [0.0] * 100
    assert delays[100] == pytest.approx(0.1)
    assert delays[101] == pytest.approx(0.2)


def test_bucket_refills_with_time_up_to_burst():
    clock = FakeClock()
    limiter = BucketRateLimiter(qps=10, burst=2, clock=clock)
    assert [limiter.when("k") for _ in range(3)] == [0, 0, pytest.approx(0.1)]
    clock.step(10)  # refills far past burst, capped at 2
    assert [limiter.when("k") for _ in range(3)] == [0, 0, pytest.approx(0.1)]


def test_bucket_tracks_no_key():
    limiter = BucketRateLimiter(clock=FakeClock())
    limiter.when("k")
    assert limiter.num_requeues("k") == 0
    limiter.forget("k")


def test_bucket_rejects_nonsense():
    with pytest.raises(ValueError):
        BucketRateLimiter(qps=0)


def test_max_of_takes_the_longest_delay_and_forwards_forget():
    clock = FakeClock()
    limiter = MaxOfRateLimiter(
        ItemExponentialFailureRateLimiter(1, 100), BucketRateLimiter(1, 1, clock=clock)
    )
    assert limiter.when("k") == 1  # exponential 1, bucket 0
    assert limiter.when("k") == 2  # exponential 2, bucket 1
    assert limiter.when("k") == 4
    assert limiter.num_requeues("k") == 3
    limiter.forget("k")
    assert limiter.num_requeues("k") == 0


def test_default_controller_rate_limiter_is_exponential_and_bucket():
    limiter = default_controller_rate_limiter(clock=FakeClock())
    assert limiter.when("k") == 0.005
    assert limiter.when("k") == 0.01
    for i in range(98):
        limiter.when(f"other-{i}")
    # the bucket (10 qps, burst 100) is now empty: the next failure of a fresh key waits 0.1 s
    assert limiter.when("fresh") == pytest.approx(0.1)
