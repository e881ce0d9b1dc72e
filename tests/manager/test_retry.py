"""The retry policy: one place for every backoff, and when an item stops being retried."""

from __future__ import annotations

import itertools

from kube_workqueue.manager.ports import State
from kube_workqueue.manager.retry import Backoff, RetryPolicy, reconnect


def test_backoff_doubles_from_its_base_up_to_its_cap():
    backoff = Backoff(0.5, 3.0)
    assert [backoff.delay(n) for n in range(5)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    assert list(itertools.islice(backoff.delays(), 4)) == [0.5, 1.0, 2.0, 3.0]
    assert backoff.delay(10_000) == 3.0  # no overflow however long it fails


def test_reconnecting_is_never_slower_than_polling():
    assert reconnect(10.0).delay(100) == 10.0
    assert reconnect(0.2).delay(0) == 0.2


def test_the_items_limiter_follows_the_item_backoff():
    policy = RetryPolicy(3, Backoff(1.0, 4.0))
    limiter = policy.rate_limiter()
    assert [limiter.when("a") for _ in range(4)] == [1.0, 2.0, 4.0, 4.0]


def test_which_items_need_work():
    policy = RetryPolicy(max_attempts=2)
    assert policy.needs_work(State.PENDING, 0)
    assert policy.needs_work(State.FAILED, 1)
    assert not policy.needs_work(State.FAILED, 2)  # out of attempts: stays failed
    assert not policy.needs_work(State.SUCCEEDED, 1)
    assert not policy.needs_work(State.RUNNING, 1)
    assert policy.gave_up(2) and not policy.gave_up(1)
