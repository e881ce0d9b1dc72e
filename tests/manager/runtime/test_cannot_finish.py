"""A `--once` run that cannot finish (`manager.runtime.cannot_finish`): the causes said per
cause, a manager that will run the items keeping the run waiting, and the end after
`--wait-for` on a stepped clock."""

from __future__ import annotations

import logging

from kube_workqueue.manager.runtime.cannot_finish import Blocked, causes


def judged(left, *, paused=False, parallelism=2, held=None, needs=None):
    return causes(left, paused=paused, parallelism=parallelism,
                  held_group=lambda name: (held or {}).get(name), needs=needs or {})  # fmt: skip


def test_each_cause_is_one_line_and_an_item_that_may_run_means_none():
    left = ["a", "b", "c", "d"]
    needs = {"a": ("gpu", "none"), "b": ("gpu", "none"), "c": ("gpu", "none")}
    assert judged(left, needs=needs, held={"d": "api"}) == (
        ["3 items need gpu, which no live manager offers",
         "1 item is in group(s) held by a limit of 0 (api): `workqueue scale --limit GROUP=N` "
         "releases them"],
        [],
    )  # fmt: skip
    assert judged(left, needs=needs) is None  # d may run here: nothing to say
    assert judged(left, needs={**needs, "d": ("gpu", "me")}) is None
    waits = judged(["a", "e"], needs={"a": ("gpu", "none"), "e": ("spot", "others")})
    spot = "1 item needs spot, which another live manager offers: it runs them"
    assert waits == (["1 item needs gpu, which no live manager offers"], [spot])
    assert judged([], paused=True) is None


def test_a_paused_queue_or_one_at_parallelism_zero_holds_every_item_left():
    (line,), _ = judged(["a", "b"], paused=True)
    assert line == "the queue is paused: 2 items wait (`workqueue resume` releases them)"
    (line,), _ = judged(["a"], parallelism=0)
    assert line.startswith("the queue's parallelism is 0: 1 item waits")


def test_the_run_ends_after_wait_for_and_a_manager_that_runs_them_keeps_it_waiting(caplog):
    now = [0.0]
    blocked = Blocked(30.0, clock=lambda: now[0])
    unmet = (["3 items need gpu, which no live manager offers"], [])
    with caplog.at_level(logging.WARNING):
        assert blocked.look(unmet) is None  # blocked from now
        now[0] = 29.0
        assert blocked.look(unmet) is None
        now[0] = 30.0
        assert blocked.look(unmet) == unmet[0]  # the end, with its lines
    said = [r.getMessage() for r in caplog.records]
    assert said == [
        "waiting: 3 items need gpu, which no live manager offers; the run ends in "
        "30.0 s unless that changes (--wait-for)"
    ]  # said once, not every look
    blocked = Blocked(30.0, clock=lambda: now[0])
    elsewhere = (unmet[0], ["2 items need spot, which another live manager offers: it runs them"])
    assert blocked.look(elsewhere) is None
    now[0] = 1000.0
    assert blocked.look(elsewhere) is None  # another manager runs some: it waits for it
    assert blocked.look(None) is None  # something may run again: the clock starts anew
    assert blocked.look(unmet) is None
    now[0] = 1029.0
    assert blocked.look(unmet) is None
