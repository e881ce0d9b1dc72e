"""The stability math: the stability table and the classic 60 s / 120 s example, Erlang C by
hand, properties, unit parsing."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kube_workqueue.manager.planning.scaling import analyse, erlang_c, recommended_parallelism


@pytest.mark.parametrize(
    ("service", "verdict"), [(30, "stable"), (60, "fragile"), (120, "unstable")]
)
def test_the_stability_table(service, verdict):
    assert analyse(60, service, 1).verdict == verdict


def test_the_classic_60s_120s_with_three_workers_is_stable():
    r = analyse(60, 120, 3)
    assert r.verdict == "stable"
    assert r.effective_service_seconds == 40
    assert r.utilization == pytest.approx(2 / 3)


def test_erlang_c_against_hand_computed_values():
    # c = 3, offered load 2: P(wait) = (8/6 * 3) / (1 + 2 + 2 + 8/6 * 3) = 4/9
    assert erlang_c(3, 2) == pytest.approx(4 / 9)
    r = analyse(60, 120, 3)
    assert r.wait_probability == pytest.approx(4 / 9)
    assert r.mean_wait_seconds == pytest.approx(53.333, abs=1e-3)  # C / (3/120 - 1/60)
    assert r.mean_latency_seconds == pytest.approx(173.333, abs=1e-3)
    # M/M/1: P(wait) = rho, mean wait = rho / (mu - lambda)
    assert erlang_c(1, 0.5) == pytest.approx(0.5)
    assert analyse(60, 30, 1).mean_wait_seconds == pytest.approx(30)
    # p95: C * exp(-(P mu - lambda) t) = 0.05
    assert r.p95_wait_seconds == pytest.approx(math.log((4 / 9) / 0.05) * 120)


def test_unstable_queues_report_growth_and_never_drain():
    r = analyse(60, 120, 1, backlog=10)
    assert r.backlog_growth_per_hour == pytest.approx(30)
    assert math.isinf(r.drain_seconds)
    assert r.as_json()["drain_seconds"] is None
    assert "mean_wait_seconds" not in r.as_json()


def test_a_backlog_drains_at_the_spare_rate():
    assert analyse(60, 30, 1, backlog=100).drain_seconds == pytest.approx(100 / (1 / 30 - 1 / 60))
    assert analyse(math.inf, 10, 2, backlog=10).drain_seconds == pytest.approx(50)


def test_json_keys():
    keys = set(analyse(60, 120, 3, backlog=5).as_json())
    assert {
        "interarrival_seconds",
        "service_seconds",
        "parallelism",
        "effective_service_seconds",
        "utilization",
        "verdict",
        "recommended_parallelism",
        "wait_probability",
        "mean_wait_seconds",
        "p95_wait_seconds",
        "mean_latency_seconds",
        "drain_seconds",
    } <= keys
    assert "backlog_growth_per_hour" in analyse(60, 120, 1).as_json()


@given(st.floats(0.5, 10_000), st.floats(0.5, 10_000), st.floats(0.5, 0.99))
def test_the_recommendation_meets_the_margin_and_one_less_does_not(interarrival, service, u):
    p = recommended_parallelism(interarrival, service, u)
    assert analyse(interarrival, service, p, target_utilization=u).utilization <= u + 1e-9
    if p > 1:
        assert analyse(interarrival, service, p - 1, target_utilization=u).utilization > u


@given(st.floats(0.5, 10_000), st.floats(0.5, 10_000), st.integers(1, 60))
def test_utilization_falls_as_parallelism_grows(interarrival, service, p):
    assert (
        analyse(interarrival, service, p + 1).utilization
        < analyse(interarrival, service, p).utilization
    )


@given(st.floats(0.5, 1000), st.floats(0.5, 1000))
def test_more_workers_never_wait_longer(interarrival, service):
    p = recommended_parallelism(interarrival, service, 0.9)
    a, b = analyse(interarrival, service, p), analyse(interarrival, service, p + 1)
    assert b.mean_wait_seconds <= a.mean_wait_seconds + 1e-9


def test_erlang_c_is_exact_for_many_servers():
    c = erlang_c(2000, 1900)
    assert 0 < c < 1


@given(
    st.floats(min_value=0.01, max_value=1e4),
    st.integers(min_value=1, max_value=500),
    st.floats(min_value=0.05, max_value=1.0),
)
def test_the_recommendation_is_always_stable_and_within_the_target(interarrival, k, target):
    service = interarrival * k / 4  # offered loads that are often whole numbers
    p = recommended_parallelism(interarrival, service, target)
    load = service / interarrival
    assert load / p < 1 and load / p <= target + 1e-9
    assert p == 1 or (load / (p - 1) > target - 1e-9 or load / (p - 1) >= 1)


def test_a_target_of_one_never_recommends_a_queue_with_no_margin():
    assert recommended_parallelism(20.0, 60.0, 1.0) == 4  # 3 would be utilization 1.00
    assert analyse(20.0, 60.0, 1, target_utilization=1.0).recommended_parallelism == 4


def test_clockwork_arrivals_and_service_never_wait_below_saturation():
    s = analyse(20.0, 50.0, 3, model="ggc", arrival_cv=0.0, service_cv=0.0)
    assert s.wait_probability == 0.0 and s.mean_wait_seconds == 0.0 and s.p95_wait_seconds == 0.0
