"""The observer hears what each call did, in the lab's vocabulary."""

from __future__ import annotations

from kube_workqueue.manager.workqueue import Event, Queue


def test_the_redelivery_trio_is_reported():
    seen = []
    q = Queue(observer=lambda event, key, detail: seen.append((str(event), key)))
    q.add("obj-0")
    key, _ = q.get()
    q.add("obj-0")
    q.add("obj-0")
    q.add("obj-0")
    q.done(key)
    q.shut_down()
    q.add("obj-0")
    assert seen == [
        ("enqueued", "obj-0"),
        ("marked_for_redelivery", "obj-0"),
        ("deduplicated", "obj-0"),
        ("deduplicated", "obj-0"),
        ("redelivered", "obj-0"),
        ("ignored_shutting_down", "obj-0"),
    ]


def test_every_add_is_reported_exactly_once():
    counts: dict[Event, int] = {}
    q = Queue(observer=lambda e, k, d: counts.__setitem__(e, counts.get(e, 0) + 1))
    adds = 0
    for i in range(200):
        q.add(i % 7)
        adds += 1
        if i % 3 == 0:
            key, _ = q.get()
            q.add(key)
            adds += 1
            q.done(key)
    add_events = {
        Event.ENQUEUED,
        Event.DEDUPLICATED,
        Event.MARKED_FOR_REDELIVERY,
        Event.IGNORED_SHUTTING_DOWN,
    }
    assert sum(n for e, n in counts.items() if e in add_events) == adds
