"""The base queue: dedup, one worker per key, redelivery, FIFO order, shut-down."""

from __future__ import annotations

import threading

from kube_workqueue.manager.workqueue import Queue

from .helpers import eventually, in_thread


def test_adding_a_waiting_key_again_is_a_noop():
    q = Queue()
    q.add("a")
    q.add("a")
    q.add("a")
    assert len(q) == 1


def test_distinct_keys_come_out_in_the_order_first_added():
    q = Queue()
    for key in ["c", "a", "b", "a", "c"]:
        q.add(key)
    got = []
    for _ in range(3):
        key, shutdown = q.get()
        assert not shutdown
        got.append(key)
        q.done(key)
    assert got == ["c", "a", "b"]


def test_a_key_added_while_held_is_not_handed_to_another_worker():
    q = Queue()
    q.add("a")
    key, _ = q.get()
    q.add("a")
    assert len(q) == 0, "a held key must not be waiting in the FIFO"
    assert q.processing_count() == 1


def test_done_redelivers_a_key_added_while_held_exactly_once():
    q = Queue()
    q.add("a")
    key, _ = q.get()
    for _ in range(50):
        q.add("a")
    q.done(key)
    assert len(q) == 1
    again, _ = q.get()
    assert again == "a"
    q.done(again)
    assert len(q) == 0
    assert q.dirty_count() == 0


def test_done_without_readd_forgets_the_key():
    q = Queue()
    q.add("a")
    key, _ = q.get()
    q.done(key)
    assert len(q) == 0 and q.processing_count() == 0 and q.dirty_count() == 0


def test_add_after_shut_down_is_ignored():
    q = Queue()
    q.shut_down()
    q.add("a")
    assert len(q) == 0
    assert q.get() == (None, True)


def test_get_hands_out_what_is_queued_after_shut_down_then_reports_shutdown():
    q = Queue()
    q.add("a")
    q.add("b")
    q.shut_down()
    assert q.shutting_down()
    assert q.get() == ("a", False)
    assert q.get() == ("b", False)
    assert q.get() == (None, True)


def test_shut_down_wakes_every_blocked_get():
    q = Queue()
    results = []
    threads = [in_thread(lambda: results.append(q.get())) for _ in range(4)]
    eventually(lambda: all(t.is_alive() for t in threads))
    q.shut_down()
    for t in threads:
        t.join(timeout=5)
    assert results == [(None, True)] * 4


def test_a_blocked_get_wakes_on_add():
    q = Queue()
    results = []
    t = in_thread(lambda: results.append(q.get()))
    q.add("x")
    t.join(timeout=5)
    assert results == [("x", False)]


def test_shut_down_with_drain_waits_until_processing_is_done():
    q = Queue()
    q.add("a")
    key, _ = q.get()
    returned = threading.Event()
    in_thread(lambda: (q.shut_down_with_drain(), returned.set()))
    eventually(q.shutting_down)
    assert not returned.wait(0.05), "must wait while a key is processing"
    q.done(key)
    assert returned.wait(5)


def test_shut_down_after_drain_started_releases_the_drain():
    q = Queue()
    q.add("a")
    q.get()
    returned = threading.Event()
    in_thread(lambda: (q.shut_down_with_drain(), returned.set()))
    eventually(q.shutting_down)
    q.shut_down()
    assert returned.wait(5)


def test_readd_while_held_is_lost_neither_after_shut_down_begins():
    # An add before shut-down marks the key dirty; done() still redelivers it to the draining get.
    q = Queue()
    q.add("a")
    key, _ = q.get()
    q.add("a")
    q.shut_down()
    q.done(key)
    assert q.get() == ("a", False)


def test_a_drained_queue_releases_the_tables_of_a_large_backlog():
    import sys

    q = Queue()
    for i in range(100_000):
        q.add(i)
    assert sys.getsizeof(q._dirty) > 1_000_000

    def worker():
        while True:
            key, shutdown = q.get()
            if shutdown:
                return
            q.done(key)

    t = in_thread(worker)
    eventually(lambda: len(q) == 0 and q.processing_count() == 0)
    # the worker is now waiting in get(), which is where the table is shed
    eventually(lambda: sys.getsizeof(q._dirty) < 1_000)
    q.shut_down()
    t.join(5)
