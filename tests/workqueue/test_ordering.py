"""The line's order as a strategy: FIFO and by priority, moves that keep an item's arrival, a
running queue switched to priorities, and the one ordering function the status view uses."""

from __future__ import annotations

import random

from kube_workqueue.manager.ports import Row
from kube_workqueue.manager.views.schedule import line_of
from kube_workqueue.manager.workqueue import Queue
from kube_workqueue.manager.workqueue.ordering import ByPriority, Fifo, line_key


def drain(queue: Queue) -> list:
    out = []
    while len(queue):
        key, _ = queue.get()
        out.append(key)
        queue.done(key)
    return out


def test_fifo_is_the_default_and_a_touch_does_not_move_a_key():
    queue = Queue()
    for key in "abc":
        queue.add(key)
    queue.add("a")  # dedup: still first, and once
    assert isinstance(queue._line, Fifo)
    assert queue.waiting() == ["a", "b", "c"] and drain(queue) == ["a", "b", "c"]


def test_by_priority_higher_first_and_first_come_first_served_within_one():
    priority = {"b": 5, "d": 5, "e": -1}
    queue = Queue(order=ByPriority(lambda k: priority.get(k, 0)))
    for key in "abcde":
        queue.add(key)
    assert queue.waiting() == ["b", "d", "a", "c", "e"]
    assert drain(queue) == ["b", "d", "a", "c", "e"]


def test_a_waiting_key_whose_priority_changes_moves_and_keeps_its_arrival():
    priority: dict[str, int] = {}
    queue = Queue(order=ByPriority(lambda k: priority.get(k, 0)))
    for key in "abcd":
        queue.add(key)
    priority["c"] = 3
    queue.add("c")  # added again while waiting: touched, it moves
    assert queue.waiting() == ["c", "a", "b", "d"]
    priority["c"] = 0
    queue.touch("c")  # back to 0: where its arrival puts it, not at the back
    assert queue.waiting() == ["a", "b", "c", "d"]
    assert drain(queue) == ["a", "b", "c", "d"]  # the stale entries were skipped


def test_a_key_held_by_a_worker_is_not_placed_again_until_done():
    priority = {"a": 1}
    queue = Queue(order=ByPriority(lambda k: priority.get(k, 0)))
    queue.add("a")
    key, _ = queue.get()
    queue.add("a")  # dirty while held: back in line at done(), once
    queue.touch("a")  # not waiting: nothing to move
    assert queue.waiting() == []
    queue.add("b")
    queue.done("a")
    assert queue.waiting() == ["a", "b"]


def test_a_running_fifo_switched_to_priorities_keeps_its_order_within_one():
    priority: dict[str, int] = {}
    queue = Queue()
    for key in "dcba":  # arrival order, not name order
        queue.add(key)
    queue.use_order(lambda waiting: ByPriority.after(waiting, lambda k: priority.get(k, 0)))
    priority["a"] = 1
    queue.touch("a")
    assert queue.waiting() == ["a", "d", "c", "b"]
    queue.add("e")
    assert drain(queue) == ["a", "d", "c", "b", "e"]


def test_many_moves_against_a_model_and_the_heap_is_compacted():
    rng = random.Random(7)
    priority: dict[int, int] = {}
    order = ByPriority(lambda k: priority.get(k, 0))
    queue = Queue(order=order)
    arrival = {}
    for key in range(200):
        priority[key] = rng.randint(-3, 3)
        queue.add(key)
        arrival[key] = key
    for _ in range(2000):
        key = rng.randrange(200)
        priority[key] = rng.randint(-3, 3)
        queue.touch(key)
    assert len(order._heap) <= 2 * len(order) + 64 + 1
    expected = sorted(range(200), key=lambda k: line_key(priority[k], arrival[k]))
    assert queue.waiting() == expected and drain(queue) == expected


def row(name: str, first_seen: float, priority: int = 0) -> Row:
    return Row(name, "pending", 0, first_seen, None, None, None, None, None, None, priority)


class View:
    ready_at = None


def test_the_status_line_is_ordered_by_the_same_function():
    rows = [row("a", 1.0), row("b", 1.0, 2), row("c", 2.0), row("d", 3.0, 2), row("e", 0.5, -1)]
    assert line_of(rows, {r.name: View() for r in rows}) == ["b", "d", "a", "c", "e"]
    priority = {r.name: r.priority for r in rows}
    queue = Queue(order=ByPriority(lambda k: priority[k]))
    for r in sorted(rows, key=lambda r: (r.first_seen, r.name)):  # the order they were seen
        queue.add(r.name)
    assert queue.waiting() == ["b", "d", "a", "c", "e"]
