"""Planning a batch: exact for clockwork service, and a bound that covers simulated drains at
least as often as the confidence it states."""

from __future__ import annotations

import math

import pytest

from kube_workqueue.manager.errors import InputError
from kube_workqueue.manager.planning.deadline import ServiceTimes, drain_bound, plan
from kube_workqueue.manager.planning.simulate import at_once, simulate


def test_clockwork_service_drains_in_whole_rounds():
    result = plan(1000, ServiceTimes(6.0, 0.0), deadline=600.0)
    chosen = result.chosen
    assert chosen.parallelism == 10  # 100 rounds of 6 s
    assert chosen.expected_seconds == chosen.bound_seconds == 600.0
    assert drain_bound(1000, ServiceTimes(6.0, 0.0), 9, 0.95) > 600.0


@pytest.mark.parametrize("service", [ServiceTimes(2.0, 1.0), ServiceTimes(2.0, 0.6)])
def test_the_bound_covers_simulated_drains(service):
    items, workers = 2_000, 8
    bound = drain_bound(items, service, workers, 0.95)
    drains = [
        simulate(at_once(), service.sampler(), workers, items, seed=seed).horizon_seconds
        for seed in range(200)
    ]
    covered = sum(d <= bound for d in drains) / len(drains)
    assert covered >= 0.95
    assert bound < 1.1 * max(drains)  # a bound, not a wild guess


def test_the_recommendation_is_the_smallest_that_meets_the_deadline():
    service = ServiceTimes(30.0, 0.5)
    result = plan(40_000, service, 6 * 3600, cost_per_hour=0.05)
    p = result.recommended_parallelism
    assert drain_bound(40_000, service, p, 0.95) <= 6 * 3600
    assert drain_bound(40_000, service, p - 1, 0.95) > 6 * 3600
    chosen = result.chosen
    assert chosen.cost == pytest.approx(chosen.worker_hours * 0.05)
    assert chosen.worker_hours == pytest.approx(p * chosen.expected_seconds / 3600)
    assert [d.parallelism for d in result.drains] == list(range(p - 2, p + 3))


def test_a_deadline_out_of_reach_says_what_it_would_need():
    result = plan(10_000, ServiceTimes(60.0, 1.0), 3600, max_parallelism=20)
    body = result.as_json()
    assert body["meets_deadline"] is False and body["recommended_parallelism"] is None
    assert body["needed_parallelism"] > 20 and body["cost"] is None


def test_measured_service_times_are_resampled():
    service = ServiceTimes.measured([1.0, 2.0, 3.0, 6.0])
    assert service.mean == 3.0 and service.samples == (1.0, 2.0, 3.0, 6.0)
    assert service.quantile(1.0) == pytest.approx(6.0)  # the top of the measured times
    assert math.isclose(service.cv, math.sqrt(3.5) / 3.0)


@pytest.mark.parametrize(
    "kwargs", [{"deadline": 0}, {"deadline": 10, "confidence": 1.0}, {"deadline": 10, "items": 0}]
)
def test_nonsense_is_refused(kwargs):
    args = {"items": 10, "service": ServiceTimes(1.0, 1.0), **kwargs}
    with pytest.raises(InputError):
        plan(args.pop("items"), args.pop("service"), args.pop("deadline"), **args)


def test_a_deadline_no_parallelism_meets_says_so_and_names_no_needed_parallelism():
    # 1,000 items of 60 s (cv 1) in 10 minutes: even one worker per item may take 10.9 min,
    # since a few of the 1,000 single runs are that long at 95 % confidence
    result = plan(1000, ServiceTimes(60.0, 1.0), 600, max_parallelism=10)
    body = result.as_json()
    assert body["meets_deadline"] is False and body["needed_parallelism"] is None
    assert drain_bound(1000, ServiceTimes(60.0, 1.0), 1000, 0.95) > 600


def test_the_plan_command_never_claims_a_parallelism_that_cannot_meet_the_deadline():
    import subprocess
    import sys

    def plan_cmd(*args):
        return subprocess.run(
            [sys.executable, "-m", "kube_workqueue.manager.cli",
             "plan", "--items", "1000", "--service", "60s",
             *args], capture_output=True, text=True, timeout=60,
        ).stdout  # fmt: skip

    out = plan_cmd("--deadline", "10m", "--max-parallelism", "10")
    assert "no parallelism meets the deadline" in out and "it needs" not in out
    assert "one worker per item (1,000)" in out
    out = plan_cmd("--deadline", "2h", "--max-parallelism", "5")
    assert "cannot meet the deadline with at most 5 workers at 95% confidence: it needs 10" in out


def test_a_group_held_by_a_limit_of_zero_never_drains_and_its_json_is_json():
    """A group whose limit is 0 never starts: every drain - expected and bound - is "never"
    (not 1.9 s beside never), and `--json` says null, since JSON has no Infinity."""
    import json

    result = plan(4, ServiceTimes(1.0, 1.0), 60, groups={"s": (3, 0), "t": (1, 2)})
    assert result.capped_by[:2] == ("s", 0) and result.chosen is None
    assert all(math.isinf(d.expected_seconds) and math.isinf(d.bound_seconds)
               for d in result.drains)  # fmt: skip
    body = json.loads(json.dumps(result.as_json(), allow_nan=False))
    assert body["capped_by"]["drain_seconds_at_confidence"] is None
    assert all(d["expected_seconds"] is None for d in body["drains"])
