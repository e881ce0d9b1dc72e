"""add_after on an injected clock: due keys appear when the clock says so, not before."""

from __future__ import annotations

import threading

from kube_workqueue.manager.workqueue import DelayingQueue, FakeClock

from .helpers import eventually


def make():
    clock = FakeClock()
    return clock, DelayingQueue("d", clock=clock)


def test_a_delayed_key_appears_only_once_its_time_has_come():
    clock, q = make()
    q.add_after("a", 10)
    assert len(q) == 0 and q.waiting_count() == 1
    clock.step(9.999)
    # the loop has woken and gone back to sleep: still not due
    eventually(lambda: q.waiting_count() == 1)
    assert len(q) == 0
    clock.step(0.001)
    eventually(lambda: len(q) == 1)
    assert q.waiting_count() == 0
    q.shut_down()


def test_zero_or_negative_delay_adds_at_once():
    _, q = make()
    q.add_after("a", 0)
    q.add_after("b", -5)
    assert len(q) == 2
    q.shut_down()


def test_the_earlier_ready_time_wins():
    clock, q = make()
    q.add_after("a", 100)
    q.add_after("a", 5)
    q.add_after("a", 50)  # later than the current 5: ignored
    assert q.waiting_count() == 1
    clock.step(5)
    eventually(lambda: len(q) == 1)
    clock.step(100)
    eventually(lambda: q.waiting_count() == 0)
    assert len(q) == 1, "a superseded entry must not add the key a second time"
    q.shut_down()


def test_due_keys_come_out_in_ready_order():
    clock, q = make()
    for key, delay in [("c", 3), ("a", 1), ("b", 2)]:
        q.add_after(key, delay)
    clock.step(3)
    eventually(lambda: len(q) == 3)
    assert [q.get()[0] for _ in range(3)] == ["a", "b", "c"]
    q.shut_down()


def test_delayed_add_dedups_with_a_waiting_key():
    clock, q = make()
    q.add("a")
    q.add_after("a", 1)
    clock.step(1)
    eventually(lambda: q.waiting_count() == 0)
    assert len(q) == 1
    q.shut_down()


def test_shut_down_ends_the_background_thread_and_ignores_add_after():
    clock, q = make()
    q.add_after("a", 10)
    q.shut_down()
    assert not q._thread.is_alive()
    q.add_after("b", 0)
    assert len(q) == 0


def test_shut_down_with_drain_also_ends_the_thread():
    _, q = make()
    q.add("a")
    key, _ = q.get()
    t = threading.Thread(target=q.shut_down_with_drain)
    t.start()
    q.done(key)
    t.join(5)
    assert not t.is_alive() and not q._thread.is_alive()


def test_no_thread_is_left_behind_by_many_queues():
    before = threading.active_count()
    for _ in range(50):
        DelayingQueue().shut_down()
    assert threading.active_count() == before


def test_real_clock_delays_are_honoured():
    q = DelayingQueue()
    q.add_after("a", 0.02)
    key, _ = q.get()  # blocks until the real delay passes
    assert key == "a"
    q.shut_down()


def test_a_large_burst_released_at_once_keeps_ready_order_and_drops_superseded_entries():
    import random

    clock, q = make()
    rng = random.Random(5)
    delays = {f"k{i}": rng.uniform(1, 100) for i in range(500)}
    for key, delay in delays.items():
        q.add_after(key, delay + 50)  # superseded below by an earlier time
        q.add_after(key, delay)
    clock.step(200)
    eventually(lambda: len(q) == 500)
    assert q.waiting_count() == 0
    got = [q.get()[0] for _ in range(500)]
    assert got == sorted(delays, key=delays.get)
    q.shut_down()
