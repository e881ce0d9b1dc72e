"""Planning a batch against a deadline: "I have 40,000 videos and six hours - how many workers,
and what will it cost?"

A batch of N items that are all there at the start is drained by P workers, each taking the next
item as soon as it is free (greedy list scheduling - what the manager does). With W the total
work (the sum of the N service times), the drain time M obeys

    W / P  <=  M  <=  W / P + (the longest of the last items to start)

so at a stated confidence q it is at most

    M_q = (N·S + z_q·sqrt(N)·S·cv) / P  +  T_q(P)

where S and cv are the service time's mean and coefficient of variation (the first term: W at
its q-quantile, by the central limit theorem) and T_q(P) the q-quantile of the longest of P
service times (the overhang of the last items). This is a bound, so it errs long: the tests hold
it against simulated drains (`manager.planning.simulate`), which it must cover at least q of
the time.
The expected drain comes from one simulated drain (exact for the distribution, fixed seed).

The recommended parallelism is the smallest P whose M_q meets the deadline; worker-hours are
what P workers held for the expected drain cost, `cost` that times the price per worker-hour.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

from ..errors import InputError
from .simulate import at_once, empirical, quantile, simulate, with_cv

MAX_ITEMS = 10**12
SIMULATED_ITEMS_MAX = 200_000  # beyond this the expected drain is W/P plus half an overhang


@dataclass(frozen=True)
class ServiceTimes:
    """A service-time distribution: its mean, CV, and how to draw from it or take quantiles."""

    mean: float
    cv: float
    samples: tuple[float, ...] = ()  # measured times: the empirical distribution

    @classmethod
    def measured(cls, samples: Sequence[float]) -> ServiceTimes:
        values = tuple(float(s) for s in samples if s > 0)
        if len(values) < 2:
            raise InputError("need at least two finished runs to measure service times")
        mean = statistics.fmean(values)
        return cls(mean, statistics.pstdev(values) / mean, tuple(sorted(values)))

    def sampler(self):
        return empirical(self.samples) if self.samples else with_cv(self.mean, self.cv)

    def quantile(self, p: float) -> float:
        """The p-quantile of one service time (p taken below 1: the top is unbounded)."""
        p = min(p, 1.0 - 1e-12)
        if self.samples:
            return quantile(self.samples, p)
        if self.cv == 0:
            return self.mean
        if self.cv == 1:
            return -self.mean * math.log1p(-p)
        sigma = math.sqrt(math.log(1 + self.cv * self.cv))
        mu = math.log(self.mean) - sigma * sigma / 2
        return math.exp(mu + sigma * NormalDist().inv_cdf(p))


@dataclass(frozen=True)
class Drain:
    parallelism: int
    expected_seconds: float
    bound_seconds: float  # at the plan's confidence
    worker_hours: float
    cost: float | None


@dataclass(frozen=True)
class Plan:
    items: int
    service: ServiceTimes
    deadline_seconds: float
    confidence: float
    recommended_parallelism: int | None  # None: not within max_parallelism (or not at all)
    # The same without the ceiling; None when no parallelism meets the deadline (one worker
    # per item still may take longer, at the confidence asked: the slowest items decide).
    needed_parallelism: int | None
    drains: list[Drain]  # around the recommendation
    cost_per_hour: float | None
    # the group whose limit bounds every drain from below, with its limit and the drain its
    # items alone take at its limit (at the confidence asked): None when no group is limited
    capped_by: tuple[str, int, float] | None = None

    @property
    def chosen(self) -> Drain | None:
        for drain in self.drains:
            if drain.parallelism == self.recommended_parallelism:
                return drain
        return None

    def as_json(self) -> dict:
        chosen = self.chosen
        return {
            "items": self.items,
            "service_seconds": self.service.mean,
            "service_cv": self.service.cv,
            "deadline_seconds": self.deadline_seconds,
            "confidence": self.confidence,
            "meets_deadline": chosen is not None,
            "recommended_parallelism": self.recommended_parallelism,
            "needed_parallelism": self.needed_parallelism,
            "drain_seconds": chosen.expected_seconds if chosen else None,
            "drain_seconds_at_confidence": chosen.bound_seconds if chosen else None,
            "worker_hours": chosen.worker_hours if chosen else None,
            "cost": chosen.cost if chosen else None,
            "drains": [{k: _finite(v) for k, v in d.__dict__.items()} for d in self.drains],
            "capped_by": None if self.capped_by is None else dict(
                zip(("group", "limit", "drain_seconds_at_confidence"),
                    (*self.capped_by[:2], _finite(self.capped_by[2])), strict=True)),
        }  # fmt: skip


def _finite(value):
    """`value`, or None (JSON's null: "never") where it is infinite - JSON has no Infinity."""
    return None if isinstance(value, float) and math.isinf(value) else value


def drain_bound(items: int, service: ServiceTimes, parallelism: int, confidence: float) -> float:
    """M_q of the module docstring."""
    if service.cv == 0:
        return math.ceil(items / parallelism) * service.mean
    z = NormalDist().inv_cdf(confidence)
    work = items * service.mean + z * math.sqrt(items) * service.mean * service.cv
    overhang = service.quantile(confidence ** (1.0 / min(parallelism, items)))
    return work / parallelism + overhang


def expected_drain(items: int, service: ServiceTimes, parallelism: int, seed: int = 1) -> float:
    if service.cv == 0:
        return math.ceil(items / parallelism) * service.mean
    if items < 2 or items > SIMULATED_ITEMS_MAX:
        return items * service.mean / parallelism + service.mean / 2
    run = simulate(at_once(), service.sampler(), parallelism, items, seed=seed)
    return run.horizon_seconds


def plan(
    items: int,
    service: ServiceTimes,
    deadline: float,
    *,
    confidence: float = 0.95,
    max_parallelism: int | None = None,
    cost_per_hour: float | None = None,
    around: int = 2,
    groups: dict[str, tuple[int, int]] | None = None,
) -> Plan:
    """`groups`: {group: (its items, its limit)} of the groups with a limit (`--limit`): a
    group capped at L drains its n items no faster than L workers can, whatever the
    parallelism - every drain is at least the slowest such group's."""
    if items < 1:
        raise InputError("nothing to plan: no items")
    if items > MAX_ITEMS:
        raise InputError(f"at most {MAX_ITEMS:,} items can be planned")
    if not 0.5 <= confidence < 1:
        raise InputError("confidence must be from 0.5 to below 1")
    if deadline <= 0:
        raise InputError("the deadline must be > 0")
    capped_by, floor_expected = None, 0.0
    for group, (count, limit) in sorted((groups or {}).items()):
        if count < 1:
            continue
        bound = math.inf if limit < 1 else drain_bound(count, service, limit, confidence)
        if capped_by is None or bound > capped_by[2]:
            capped_by = (group, limit, bound)
        if limit >= 1:
            floor_expected = max(floor_expected, expected_drain(count, service, limit))
        else:  # a group held by a limit of 0 never drains: nothing is expected of it either
            floor_expected = math.inf
    floor_bound = capped_by[2] if capped_by else 0.0
    needed = None
    if floor_bound <= deadline:
        needed = _smallest_meeting(items, service, deadline, confidence, items)
    ceiling = min(max_parallelism or items, items)
    recommended = needed if needed is not None and needed <= ceiling else None
    centre = recommended or min(needed or ceiling, ceiling)
    drains = []
    for p in range(max(1, centre - around), min(ceiling, centre + around) + 1):
        expected = max(expected_drain(items, service, p), floor_expected)
        hours = p * expected / 3600.0 if math.isfinite(expected) else math.inf
        drains.append(
            Drain(
                parallelism=p,
                expected_seconds=expected,
                bound_seconds=max(drain_bound(items, service, p, confidence), floor_bound),
                worker_hours=hours,
                cost=None if cost_per_hour is None else hours * cost_per_hour,
            )
        )
    return Plan(
        items=items,
        service=service,
        deadline_seconds=deadline,
        confidence=confidence,
        recommended_parallelism=recommended,
        needed_parallelism=needed,
        drains=drains,
        cost_per_hour=cost_per_hour,
        capped_by=capped_by,
    )


def _smallest_meeting(items, service, deadline, confidence, ceiling) -> int | None:
    """The smallest P in [1, ceiling] whose bound meets the deadline (the bound falls as P
    grows, up to the overhang), or None."""
    if drain_bound(items, service, ceiling, confidence) > deadline:
        return None
    lo, hi = 1, ceiling
    while lo < hi:
        mid = (lo + hi) // 2
        if drain_bound(items, service, mid, confidence) <= deadline:
            hi = mid
        else:
            lo = mid + 1
    return lo
