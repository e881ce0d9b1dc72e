"""The grouped line (`manager.tenancy.line`) with its gate (`manager.tenancy.gate`):
limits, rates and fair share decided where the next item is chosen."""

from __future__ import annotations

import pytest

from kube_workqueue.manager.errors import InputError
from kube_workqueue.manager.tenancy.gate import GroupGate
from kube_workqueue.manager.tenancy.line import Grouped
from kube_workqueue.manager.tenancy.rules import (
    TenancyOptions,
    group_pattern,
    limit_rule,
    rate_rule,
    rate_text,
    weight_rule,
)
from kube_workqueue.manager.workqueue import Queue


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def line(options: TenancyOptions, priorities=None, clock=None):
    gate = GroupGate(options, clock or Clock())
    group_of = lambda name: name.split("/")[0] if "/" in name else None  # noqa: E731
    ordered = Grouped(group_of, lambda n: (priorities or {}).get(n, 0), gate, fair=options.fair)
    return ordered, gate


def take_all(ordered, most=1000):
    taken = []
    while ordered and len(taken) < most:
        taken.append(ordered.pop())
    return taken


def test_a_limit_holds_its_group_and_an_end_frees_it():
    ordered, gate = line(TenancyOptions(limits=[("a", 2)]))
    for name in ["a/1", "a/2", "a/3", "b/1", "x"]:
        ordered.push(name)
    assert take_all(ordered) == ["a/1", "a/2", "b/1", "x"]
    assert len(ordered) == 1 and not ordered  # a/3 waits, held
    assert gate.why_held("a") == "group a at its limit 2/2"
    ordered.ended("a/1")
    assert ordered and ordered.pop() == "a/3"


def test_a_limit_of_zero_holds_a_group_and_star_caps_each_group():
    ordered, gate = line(TenancyOptions(limits=[("paused", 0), ("*", 1)]))
    for name in ["paused/1", "a/1", "a/2", "b/1", "b/2", "free"]:
        ordered.push(name)
    assert take_all(ordered) == ["a/1", "b/1", "free"]
    assert gate.why_held("paused") == "group paused is held (its limit is 0)"


def test_without_fair_share_the_line_keeps_priority_then_arrival():
    ordered, _ = line(TenancyOptions(limits=[("b", 1)]), priorities={"a/3": 5})
    for name in ["a/1", "b/1", "b/2", "a/2", "a/3"]:
        ordered.push(name)
    assert list(ordered) == ["a/3", "a/1", "b/1", "b/2", "a/2"]
    assert take_all(ordered) == ["a/3", "a/1", "b/1", "a/2"]


def test_fair_share_gives_the_next_slot_to_the_group_furthest_below_its_share():
    ordered, _ = line(TenancyOptions(fair=True))
    for i in range(10):
        ordered.push(f"a/{i}")
    first = [ordered.pop() for _ in range(4)]  # A alone: it takes every slot
    for i in range(3):
        ordered.push(f"b/{i}")
    # A runs 4, B none: B's items go first until B catches up
    assert [ordered.pop() for _ in range(3)] == ["b/0", "b/1", "b/2"]
    assert first == ["a/0", "a/1", "a/2", "a/3"]
    ordered.ended("a/0")
    assert ordered.pop() == "a/4"


def test_weights_divide_the_running_slots():
    ordered, _ = line(TenancyOptions(fair=True, weights=[("gold", 3.0)]))
    for i in range(20):
        ordered.push(f"gold/{i}")
        ordered.push(f"tin/{i}")
    taken = [ordered.pop() for _ in range(8)]
    assert sum(n.startswith("gold/") for n in taken) == 6  # 3:1 of eight running slots


def test_priorities_order_within_a_group_under_fair_share():
    ordered, _ = line(TenancyOptions(fair=True), priorities={"a/2": 9})
    for name in ["a/1", "a/2", "b/1"]:
        ordered.push(name)
    assert ordered.pop() == "a/2"  # ties between groups by the head's priority, then arrival
    assert ordered.pop() == "b/1"


def test_a_rate_spends_tokens_that_come_back_one_period_after_each_start():
    clock = Clock()
    ordered, gate = line(TenancyOptions(rates=[("a", (2, 10.0))]), clock=clock)
    for i in range(5):
        ordered.push(f"a/{i}")
    assert take_all(ordered) == ["a/0", "a/1"]
    # a token comes back a period after it was spent, and a twentieth of it (at most 0.5 s)
    assert ordered.ready_in() == pytest.approx(10.5)
    assert gate.why_held("a") == "group a rate 2/10s: next start in 10 s"
    clock.now += 4
    ordered.ended("a/0")  # an end does not give a rate's token back
    assert not ordered
    clock.now += 6
    assert not ordered
    clock.now += 0.5
    assert take_all(ordered) == ["a/2", "a/3"]


def test_the_queue_waits_for_a_held_group_and_an_end_wakes_it():
    ordered, _ = line(TenancyOptions(limits=[("a", 1)]))
    queue = Queue(order=ordered)
    queue.add("a/1")
    queue.add("a/2")
    assert queue.get() == ("a/1", False)
    assert not queue.has_waiting() and len(queue) == 1
    queue.done("a/1")
    assert queue.has_waiting()
    assert queue.get() == ("a/2", False)


def test_a_dedup_add_of_a_held_key_does_not_count_it_twice():
    ordered, gate = line(TenancyOptions(limits=[("a", 1)]))
    queue = Queue(order=ordered)
    queue.add("a/1")
    assert queue.get() == ("a/1", False)
    queue.add("a/1")  # dirty while held: back in line once at done
    queue.done("a/1")
    assert gate.running["a"] == 0 and queue.get() == ("a/1", False)
    assert gate.running["a"] == 1


@pytest.mark.parametrize(
    ("parse", "text", "message"),
    [
        (group_pattern, "([a-z]", "not a regular expression"),
        (group_pattern, "^[a-z]+/", "wants a capture group"),
        (limit_rule, "acme", "wants GLOB=N"),
        (limit_rule, "acme=-1", "wants a whole number"),
        (rate_rule, "acme=100", "wants N/PERIOD"),
        (rate_rule, "acme=100/fortnight", "not a period"),
        (rate_rule, "acme=0/1m", "wants N/PERIOD with N a whole number >= 1"),
        (weight_rule, "acme=0", "wants a number > 0"),
        (weight_rule, "acme=nan", "wants a number > 0"),
    ],
)
def test_bad_rules_are_refused_with_a_message(parse, text, message):
    with pytest.raises(InputError, match="^" + message.replace("(", r"\(")):
        parse(text)


def test_rules_parse_and_print():
    assert rate_rule("acme=100/1m") == ("acme", (100, 60.0))
    assert rate_rule("a=20/10s") == ("a", (20, 10.0))
    assert rate_rule("a=5/h") == ("a", (5, 3600.0))
    assert rate_text((100, 60.0)) == "100/1m" and rate_text((20, 10.0)) == "20/10s"
    assert limit_rule("we=ird=3") == ("we=ird", 3)
    assert weight_rule("gold-*=2.5") == ("gold-*", 2.5)
