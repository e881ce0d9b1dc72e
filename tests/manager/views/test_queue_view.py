"""The queue view: reasons in words, positions, the mean-value schedule, the forecast."""

from __future__ import annotations

import pytest

from kube_workqueue.manager.items import QueueRecord
from kube_workqueue.manager.ports import Row
from kube_workqueue.manager.retry import Backoff, RetryPolicy
from kube_workqueue.manager.views.queue_view import Context, build, context_from_facts, from_record

NOW = 1_000_000.0


def row(name, state, attempts=0, first_seen=NOW - 100, started=None, finished=None, **kw):
    return Row(
        name,
        state,
        attempts,
        first_seen,
        started,
        finished,
        kw.get("exit_code"),
        kw.get("log_path"),
        kw.get("last_error"),
    )


def done(name, took, finished, state="succeeded", **kw):
    return row(name, state, 1, finished - took - 5, finished - took, finished, **kw)


def context(parallelism=2, **kw):
    policy = kw.pop("policy", RetryPolicy(3, Backoff(10.0, 300.0)))
    return Context(now=NOW, parallelism=parallelism, policy=policy, **kw)


def test_without_a_manager_there_is_a_line_but_no_schedule():
    rows = [row("b", "pending", first_seen=NOW - 5), row("a", "pending", first_seen=NOW - 9)]
    view = build("here", rows, Context(now=NOW))
    assert [(i.name, i.position, i.eta_seconds) for i in view.waiting()] == [
        ("a", 1, None),
        ("b", 2, None),
    ]
    assert {i.reason for i in view.items} == {"waiting for a manager to run the queue"}
    f = view.forecast
    assert (f.drain_seconds, f.utilization, f.verdict, f.parallelism) == (None, None, None, None)


def test_the_schedule_fills_free_slots_then_follows_the_running_items():
    # S = 10 s measured; two slots: one item has run 4 s (frees in 6 s), one slot free.
    rows = [
        done("old-1", 10.0, NOW - 50),
        done("old-2", 10.0, NOW - 40),
        row("run", "running", 1, NOW - 30, NOW - 4),
        row("w1", "pending", first_seen=NOW - 3),
        row("w2", "pending", first_seen=NOW - 2),
        row("w3", "pending", first_seen=NOW - 1),
    ]
    view = build("here", rows, context())
    etas = {i.name: i.eta_seconds for i in view.waiting()}
    assert etas == pytest.approx({"w1": 0.0, "w2": 6.0, "w3": 10.0})
    assert view.forecast.drain_seconds == pytest.approx(20.0)  # w3 starts at 10, runs 10
    assert view.forecast.service_seconds == pytest.approx(10.0)
    assert view.counts == {"pending": 3, "running": 1, "succeeded": 2, "failed": 0, "cancelled": 0}
    running = next(i for i in view.items if i.name == "run")
    assert running.reason.startswith("running since ") and "4.0 s so far" in running.reason


def test_an_overrunning_item_frees_its_slot_now_not_in_the_past():
    rows = [done("d", 10.0, NOW - 60), row("run", "running", 1, NOW - 99, NOW - 30)]
    rows.append(row("w", "pending", first_seen=NOW - 1))
    view = build("here", rows, context(parallelism=1))
    assert view.waiting()[0].eta_seconds == 0.0


def test_a_high_priority_retry_is_shown_where_it_starts_when_its_backoff_ends():
    # S = 30 s, one slot, freed in 5 s; f (priority 5) failed 1 s ago and backs off 10 s:
    # a starts at 5 s; when the slot frees again (35 s) f is ready and overtakes b.
    from dataclasses import replace

    rows = [
        done("d", 30.0, NOW - 60),
        row("run", "running", 1, NOW - 40, NOW - 25),
        row("a", "pending", first_seen=NOW - 3),
        row("b", "pending", first_seen=NOW - 2),
        replace(row("f", "failed", 1, NOW - 40, NOW - 31, NOW - 1, exit_code=3), priority=5),
    ]
    view = build("here", rows, context(parallelism=1))
    shown = [(i.name, i.position, i.eta_seconds) for i in view.waiting()]
    assert shown == [("a", 1, pytest.approx(5.0)), ("f", 2, pytest.approx(35.0)),
                     ("b", 3, pytest.approx(65.0))]  # fmt: skip
    assert view.forecast.drain_seconds == pytest.approx(95.0)
    unranked = build("here", [replace(r, priority=0) for r in rows], context(parallelism=1))
    assert [i.name for i in unranked.waiting()] == ["a", "b", "f"]  # the backoff ends last


def test_a_failed_item_with_attempts_left_is_backing_off_in_line():
    rows = [
        done("d", 2.0, NOW - 60),
        row("f", "failed", 1, NOW - 20, NOW - 10, NOW - 5, exit_code=3),
        row("gone", "failed", 3, NOW - 20, NOW - 10, NOW - 6, exit_code=4),
    ]
    view = build("here", rows, context(parallelism=1))
    backing = next(i for i in view.items if i.name == "f")
    assert backing.state == "failed" and backing.position == 1
    assert backing.reason.startswith("backing off until ")
    assert "failed with exit code 3; attempt 1 of 3" in backing.reason
    assert backing.eta_seconds == pytest.approx(5.0)  # finished 5 s ago, backoff 10 s
    for_good = next(i for i in view.items if i.name == "gone")
    assert for_good.position is None
    assert for_good.reason == "failed with exit code 4 after 3 attempts"
    assert for_good.exit_code == 4


def test_forecast_uses_the_measured_rates():
    # one arrival every 10 s, 15 s of service: load 1.5; at P=1 that is unstable
    rows = [done(f"i{k}", 15.0, NOW - 200 + 10 * k) for k in range(10)]
    rows = [
        Row(r.name, r.state, 1, NOW - 300 + 10 * k, r.started, r.finished, 0, None, None)
        for k, r in enumerate(rows)
    ]
    view = build("here", rows, context(parallelism=1))
    f = view.forecast
    assert f.interarrival_seconds == pytest.approx(10.0)
    assert f.utilization == pytest.approx(1.5)
    assert f.verdict == "unstable" and f.recommended_parallelism == 2


def test_succeeded_reason_and_json_shape():
    view = build("here", [done("ok", 2.5, NOW - 1, exit_code=0, log_path="/l")], context())
    item = view.as_json()["items"][0]
    assert item["reason"] == "succeeded in 2.5 s"
    assert item["exit_code"] == 0 and item["log"] == "/l" and item["ran_seconds"] == 2.5
    assert item["since"].endswith("Z") and "position" not in item


def test_reasons_a_backend_knows_better_win():
    rows = [row("r", "running", 1, NOW - 9, NOW - 8)]
    view = build("here", rows, context(), reasons={"r": "waiting for a node (unschedulable)"})
    assert view.items[0].reason == "waiting for a node (unschedulable)"


def test_from_record_adds_listed_names_and_unnamed_counts():
    record = QueueRecord("ns", [done("a", 1.0, NOW - 5)], None, unnamed={"succeeded": 4})
    view = from_record(record, NOW, listed=["a", "new.mp4"])
    assert view.counts == {"pending": 1, "running": 0, "succeeded": 5, "failed": 0, "cancelled": 0}
    assert view.waiting()[0].name == "new.mp4"


def test_facts_from_another_version_give_no_schedule_rather_than_a_wrong_one():
    assert context_from_facts({"parallelism": "many"}, NOW).parallelism is None
    facts = {"parallelism": 3, "max_attempts": 2, "retry_backoff": 1, "retry_backoff_cap": 9}
    ctx = context_from_facts(facts, NOW)
    assert ctx.parallelism == 3 and ctx.policy.max_attempts == 2


def test_a_running_item_whose_pod_has_not_started_holds_its_slot_a_whole_mean():
    rows = [done("d", 10.0, NOW - 60), row("stuck", "running", 1, NOW - 99, NOW - 90)]
    rows.append(row("w", "pending", first_seen=NOW - 1))
    plain = build("here", rows, context(parallelism=1))
    assert plain.waiting()[0].eta_seconds == 0.0  # past the mean: frees its slot now
    explained = build(
        "here", rows, context(parallelism=1), reasons={"stuck": "image cannot be pulled"}
    )
    assert explained.waiting()[0].eta_seconds == pytest.approx(10.0)
    assert explained.forecast.drain_seconds == pytest.approx(20.0)


def test_status_orders_listed_items_by_the_rules_the_manager_left_and_ignores_bad_ones():
    facts = {"parallelism": 1, "priorities": [["urgent-*", 4], "junk", ["x", "high"], [1, 2]]}
    record = QueueRecord("here", [], facts=facts)
    view = from_record(record, NOW, ["a", "urgent-b", "c"], {"c": 2})
    assert [(i.name, i.priority) for i in view.waiting()] == [("urgent-b", 4), ("c", 2), ("a", 0)]


def test_a_capped_group_starts_its_next_item_when_one_of_its_own_ends():
    # S = 10 s; four slots; api (limit 2) runs two that free at 6 s and 8 s, two slots free
    from kube_workqueue.manager.tenancy.rules import TenancyOptions

    rows = [
        done("d-1", 10.0, NOW - 50),
        done("d-2", 10.0, NOW - 40),
        row("api/r1", "running", 1, NOW - 30, NOW - 4),
        row("api/r2", "running", 1, NOW - 30, NOW - 2),
        row("api/w1", "pending", first_seen=NOW - 5),
        row("api/w2", "pending", first_seen=NOW - 4),
        row("web/w1", "pending", first_seen=NOW - 3),
    ]
    tenancy = TenancyOptions(group="^([^/]+)/", limits=[("api", 2)])
    view = build("here", rows, context(parallelism=4, tenancy=tenancy))
    etas = {i.name: i.eta_seconds for i in view.waiting()}
    # without the limit api/w1 and api/w2 would take the two free slots now
    assert etas == pytest.approx({"web/w1": 0.0, "api/w1": 6.0, "api/w2": 8.0})
    assert [i.name for i in view.waiting()] == ["web/w1", "api/w1", "api/w2"]
    reasons = {i.name: i.reason for i in view.waiting()}
    assert reasons["api/w1"] == "waiting: group api at its limit 2/2"
    assert reasons["web/w1"] == "waiting for a free slot"
    assert view.extra["groups"]["api"]["held"] == "group api at its limit 2/2"
    assert view.forecast.drain_seconds == pytest.approx(18.0)  # api/w2 starts at 8, runs 10
    # before a service time is measured only what a free slot takes now has a start: not a
    # capped group's item
    fresh = [r for r in rows if r.state != "succeeded"]
    etas = {i.name: i.eta_seconds for i in build("here", fresh, context(
        parallelism=4, tenancy=tenancy)).waiting()}  # fmt: skip
    assert etas == {"web/w1": 0.0, "api/w1": None, "api/w2": None}


def test_a_rated_group_starts_its_next_item_when_a_token_comes_back():
    # S = 10 s; four slots free; api's rate 1/1m spent 20 s ago: its next start is in about
    # 40 s (a period and a margin after the start), then a minute later - never "in 0 ms"
    from kube_workqueue.manager.tenancy.gate import returns_after
    from kube_workqueue.manager.tenancy.rules import TenancyOptions

    rows = [
        done("d-1", 10.0, NOW - 50),
        row("api/r0", "succeeded", 1, NOW - 60, NOW - 20, NOW - 10),
        row("api/w1", "pending", first_seen=NOW - 5),
        row("api/w2", "pending", first_seen=NOW - 4),
        row("web/w1", "pending", first_seen=NOW - 3),
    ]
    tenancy = TenancyOptions(group="^([^/]+)/", rates=[("api", (1, 60.0))])
    view = build("here", rows, context(parallelism=4, tenancy=tenancy))
    etas = {i.name: i.eta_seconds for i in view.waiting()}
    first = returns_after(60.0) - 20.0
    assert etas == pytest.approx({"web/w1": 0.0, "api/w1": first,
                                  "api/w2": first + returns_after(60.0)})  # fmt: skip
    assert view.forecast.drain_seconds == pytest.approx(first + returns_after(60.0) + 10.0)
    # before a service time is measured: what a free slot takes now starts now - not an item
    # of a group whose rate is spent (its token spent by a run still going)
    fresh = [r for r in rows if r.state != "succeeded"] + [row("api/r0", "running", 1,
                                                               NOW - 60, NOW - 20)]  # fmt: skip
    etas = {i.name: i.eta_seconds for i in build("here", fresh, context(
        parallelism=4, tenancy=tenancy)).waiting()}  # fmt: skip
    assert etas == {"web/w1": 0.0, "api/w1": None, "api/w2": None}
