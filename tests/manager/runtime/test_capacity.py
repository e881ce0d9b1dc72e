"""Capacity: a semaphore whose limit can change while it is held, and that closes."""

from __future__ import annotations

import threading

import pytest

from kube_workqueue.manager.runtime.capacity import Capacity


def test_capacity_blocks_at_the_limit_and_follows_a_new_limit():
    cap = Capacity(1)
    assert cap.acquire()
    got = threading.Event()
    t = threading.Thread(target=lambda: cap.acquire() and got.set())
    t.start()
    assert not got.wait(0.05)
    cap.set_limit(2)
    assert got.wait(2)
    cap.release()
    cap.release()
    assert cap.in_use == 0


def test_capacity_closed_wakes_waiters_with_false():
    cap = Capacity(1)
    cap.acquire()
    result = []
    t = threading.Thread(target=lambda: result.append(cap.acquire()))
    t.start()
    cap.close()
    t.join(2)
    assert result == [False]


def test_capacity_rejects_nonsense():
    with pytest.raises(ValueError):
        Capacity(0)


def test_a_paused_capacity_gives_no_slot_until_resumed_and_keeps_taken_ones():
    import threading

    paused = [False]
    cap = Capacity(2, paused=lambda: paused[0])
    assert cap.acquire()  # a running item keeps its slot when the queue is paused
    paused[0] = True
    got = []
    t = threading.Thread(target=lambda: got.append(cap.acquire()))
    t.start()
    t.join(0.3)
    assert t.is_alive() and got == [] and cap.in_use == 1
    paused[0] = False
    cap.poke()
    t.join(2)
    assert got == [True] and cap.in_use == 2


def test_a_slot_is_kept_for_the_next_item_only_while_the_limit_allows_it():
    paused = {"on": False}
    capacity = Capacity(2, paused=lambda: paused["on"])
    assert capacity.acquire() and capacity.acquire()
    assert capacity.keep() and capacity.in_use == 2  # the limit still allows both
    capacity.set_limit(1)  # lowered: the kept slot goes back
    assert not capacity.keep() and capacity.in_use == 1
    paused["on"] = True  # paused: no slot is kept for new work
    assert not capacity.keep() and capacity.in_use == 0
