"""The scaling math of Burns' work-queue pattern (*Designing Distributed Systems*, "Work Queue
Systems"), and the M/M/c (Erlang C) queue behind it.

A capped work queue is stable only while the effective service time (service / parallelism)
stays below the interarrival time, with a margin. In rates: arrivals λ = 1/interarrival,
service μ = 1/service, offered load a = λ/μ = service/interarrival (how many workers the load
keeps busy), utilization ρ = a/P.

    verdict    stable    ρ < U              (U: target utilization, 0.9 by default)
               fragile   U <= ρ <= 1        ("balanced but fragile")
               unstable  ρ > 1              (the backlog grows without bound)
    recommended parallelism: the smallest P with ρ <= U and ρ < 1

When ρ < 1, M/M/c gives the waiting behaviour, assuming Poisson arrivals and exponential
service times (coefficient of variation 1 for both): Erlang C is the chance an arriving item
waits; a waiting item waits exponentially with rate Pμ - λ, so
    mean wait = C / (Pμ - λ),   P(wait > t) = C·e^-(Pμ-λ)t,   p95 wait = ln(C/0.05) / (Pμ - λ)
With `model="ggc"` the mean wait is Allen and Cunneen's G/G/c approximation: the M/M/c wait
scaled by (ca² + cs²) / 2, where ca and cs are the coefficients of variation of the interarrival
and service times (1 and 1 give M/M/c back; clockwork service halves the wait). The p95 wait then
keeps M/M/c's shape - wait with probability C, exponentially with the adjusted mean - an
approximation of an approximation, which `workqueue stability --check` holds against the
simulator (`manager.planning.simulate`).
When ρ >= 1, the backlog grows by λ - Pμ items per unit of time. A backlog of N items drains in
N / (Pμ - λ) (infinite when Pμ <= λ).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import InputError

MODELS = ("mmc", "ggc")
MAX_PARALLELISM = 1_000_000  # Erlang C costs one step per worker


def erlang_c(servers: int, offered_load: float) -> float:
    """Probability that an arrival waits in M/M/c, for offered load a < c servers. Computed
    through the Erlang B recursion, which stays exact for thousands of servers."""
    if offered_load <= 0:
        return 0.0
    if offered_load >= servers:
        return 1.0
    b = 1.0
    for k in range(1, servers + 1):
        b = offered_load * b / (k + offered_load * b)
    return servers * b / (servers - offered_load * (1 - b))


def recommended_parallelism(interarrival: float, service: float, target: float) -> int:
    """The smallest P with service / (P · interarrival) <= target that is also stable (below
    1: a target of 1 must not recommend a queue with no margin at all)."""
    if math.isinf(interarrival):
        return 1
    load = service / interarrival
    parallelism = max(1, math.ceil(load / target - 1e-9))
    while load / parallelism >= 1:
        parallelism += 1
    return parallelism


@dataclass(frozen=True)
class Stability:
    interarrival_seconds: float
    service_seconds: float
    parallelism: int
    target_utilization: float
    effective_service_seconds: float
    utilization: float
    verdict: str
    recommended_parallelism: int
    wait_probability: float | None = None
    mean_wait_seconds: float | None = None
    p95_wait_seconds: float | None = None
    mean_latency_seconds: float | None = None
    backlog_growth_per_hour: float | None = None
    backlog: int | None = None
    drain_seconds: float | None = None
    model: str = "mmc"
    arrival_cv: float = 1.0
    service_cv: float = 1.0

    def as_json(self) -> dict:
        out = {
            "interarrival_seconds": _finite(self.interarrival_seconds),
            "service_seconds": self.service_seconds,
            "parallelism": self.parallelism,
            "target_utilization": self.target_utilization,
            "effective_service_seconds": self.effective_service_seconds,
            "utilization": self.utilization,
            "verdict": self.verdict,
            "recommended_parallelism": self.recommended_parallelism,
            "model": self.model,
            # the arrival rate these workers sustain at the target utilization
            "max_arrivals_per_hour": 3600.0
            * self.parallelism
            * self.target_utilization
            / self.service_seconds,
        }
        if self.utilization < 1:
            out.update(
                wait_probability=self.wait_probability,
                mean_wait_seconds=self.mean_wait_seconds,
                p95_wait_seconds=self.p95_wait_seconds,
                mean_latency_seconds=self.mean_latency_seconds,
            )
        else:
            out["backlog_growth_per_hour"] = self.backlog_growth_per_hour
        if self.backlog is not None:
            out["backlog"] = self.backlog
            out["drain_seconds"] = _finite(self.drain_seconds)
        return out


def _finite(value: float | None) -> float | None:
    return None if value is None or math.isinf(value) else value


def verdict_for(utilization: float, target: float) -> str:
    if utilization < target:
        return "stable"
    if utilization <= 1.0:
        return "fragile"
    return "unstable"


def analyse(
    interarrival: float,
    service: float,
    parallelism: int = 1,
    *,
    target_utilization: float = 0.9,
    backlog: int | None = None,
    model: str = "mmc",
    arrival_cv: float = 1.0,
    service_cv: float = 1.0,
) -> Stability:
    """Everything the stability calculator reports. `interarrival` may be math.inf (no
    arrivals: only a backlog to drain). `model` is "mmc" or "ggc" (with the two CVs)."""
    if service <= 0 or interarrival <= 0:
        raise InputError("interarrival and service times must be > 0")
    if not 1 <= parallelism <= MAX_PARALLELISM:
        raise InputError(f"parallelism must be from 1 to {MAX_PARALLELISM:,}")
    if model not in MODELS:
        raise InputError(f"model must be one of {', '.join(MODELS)}")
    for name, cv in (("arrival", arrival_cv), ("service", service_cv)):
        if not 0 <= cv < math.inf:
            raise InputError(f"the {name} coefficient of variation must be >= 0")
    if not 0 < target_utilization <= 1:
        raise InputError("target utilization must be in (0, 1]")
    if backlog is not None and backlog < 0:
        raise InputError("backlog must be >= 0")
    arrival_rate = 0.0 if math.isinf(interarrival) else 1.0 / interarrival
    service_rate = 1.0 / service
    load = arrival_rate / service_rate
    utilization = load / parallelism
    fields: dict = {}
    spare = parallelism * service_rate - arrival_rate  # items per second the workers gain
    if utilization < 1:
        factor = (arrival_cv**2 + service_cv**2) / 2.0 if model == "ggc" else 1.0
        # Clockwork arrivals and service (both cvs 0) below saturation: nobody ever waits.
        c = erlang_c(parallelism, load) if factor > 0 else 0.0
        mean_wait = factor * c / spare
        waiting_mean = mean_wait / c if c > 0 else 0.0  # mean wait of an item that waits
        p95 = waiting_mean * math.log(c / 0.05) if c > 0.05 else 0.0
        fields.update(
            wait_probability=c,
            mean_wait_seconds=mean_wait,
            p95_wait_seconds=p95,
            mean_latency_seconds=mean_wait + service,
        )
    else:
        fields["backlog_growth_per_hour"] = (arrival_rate - parallelism * service_rate) * 3600.0
    if backlog is not None:
        fields.update(backlog=backlog, drain_seconds=(backlog / spare) if spare > 0 else math.inf)
    return Stability(
        interarrival_seconds=interarrival,
        service_seconds=service,
        parallelism=parallelism,
        target_utilization=target_utilization,
        effective_service_seconds=service / parallelism,
        utilization=utilization,
        verdict=verdict_for(utilization, target_utilization),
        recommended_parallelism=recommended_parallelism(interarrival, service, target_utilization),
        model=model,
        arrival_cv=arrival_cv if model == "ggc" else 1.0,
        service_cv=service_cv if model == "ggc" else 1.0,
        **fields,
    )


def expected_latency(interarrival: float, service: float, parallelism: int) -> float:
    """Mean wait + service under M/M/c; infinite when the queue is not stable."""
    s = analyse(interarrival, service, parallelism)
    return s.mean_latency_seconds if s.mean_latency_seconds is not None else math.inf
