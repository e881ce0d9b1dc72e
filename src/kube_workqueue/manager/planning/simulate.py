"""A discrete-event simulation of the work queue: items arrive, wait for one of P workers, are
served first come first served, and leave. Deterministic for a seed.

The stability calculator's formulas assume M/M/c - Poisson arrivals, exponential service. Real
drops come in bursts and thumbnail times are far from exponential; this answers for the
distributions people actually have:

    arrivals   poisson (exponential gaps) · deterministic · lognormal gaps with a CV ·
               bursts of N every period · replayed times (from a ledger)
    service    exponential · deterministic · lognormal with a CV · empirical (resampled
               from measured times)

The queue is simulated exactly, not stepped: items are taken in arrival order and each starts at
max(its arrival, the earliest time a worker is free) - a heap of the P workers' free times - so
a run costs O(N log P) and 1,000,000 items take a few seconds in pure Python. Start times come
out in order, so the backlog (items waiting, not yet started) at any time is arrivals so far
minus starts so far, walked once to find its maximum and its time average.

The mean wait carries a 95% confidence interval by batch means: the first `warmup` share of
items is dropped (the queue starts empty), the rest is cut into `batches` consecutive batches,
and the interval is mean ± t(0.975, batches-1) · stdev(batch means) / sqrt(batches), widened by
the lag-1 autocorrelation left between neighbouring batches (an AR(1) correction). A single run
at high utilization scatters by several percent even at 200,000 items; the interval says how far.
"""

from __future__ import annotations

import heapq
import math
import random
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..errors import InputError

# t(0.975, k-1) for the batch-means interval, by number of batches k.
_T975 = {5: 2.776, 10: 2.262, 15: 2.145, 20: 2.093, 30: 2.045}
MAX_ITEMS = 50_000_000
MAX_PARALLELISM = 1_000_000
PLOT_POINTS = 2_000

Sampler = Callable[[random.Random], float]


# -- distributions -------------------------------------------------------------------------


def exponential(mean: float) -> Sampler:
    rate = 1.0 / mean
    return lambda rng: rng.expovariate(rate)


def deterministic(mean: float) -> Sampler:
    return lambda rng: mean


MAX_CV = 100.0  # beyond this, lognormal draws overflow to infinity and zero


def lognormal(mean: float, cv: float) -> Sampler:
    """Lognormal times with this mean and coefficient of variation (stdev / mean)."""
    if not 0 < mean < math.inf:
        raise InputError(f"a mean time must be > 0: {mean!r}")
    if not 0 <= cv <= MAX_CV:
        raise InputError(f"a coefficient of variation must be from 0 to {MAX_CV:g}: {cv!r}")
    sigma2 = math.log(1.0 + cv * cv)
    mu, sigma = math.log(mean) - sigma2 / 2.0, math.sqrt(sigma2)
    return lambda rng: rng.lognormvariate(mu, sigma)


def empirical(samples: Sequence[float]) -> Sampler:
    """Resample measured times (each draw one of them, uniformly)."""
    values = [float(s) for s in samples if s >= 0]
    if not values:
        raise InputError("no measured times to resample")
    return lambda rng: rng.choice(values)


def with_cv(mean: float, cv: float) -> Sampler:
    """The natural distribution for a CV: deterministic at 0, exponential at 1, else lognormal."""
    if mean <= 0 or not math.isfinite(mean):
        raise InputError(f"a mean time must be > 0: {mean!r}")
    if not 0 <= cv <= MAX_CV:
        raise InputError(f"a coefficient of variation must be from 0 to {MAX_CV:g}: {cv!r}")
    if cv == 0:
        return deterministic(mean)
    if cv == 1:
        return exponential(mean)
    return lognormal(mean, cv)


# -- arrivals ------------------------------------------------------------------------------


def gaps(sampler: Sampler) -> Callable[[random.Random, int], list[float]]:
    """Arrival times from independent gaps drawn from `sampler` (the first item at its gap)."""

    def times(rng: random.Random, n: int) -> list[float]:
        out, t = [], 0.0
        for _ in range(n):
            t += sampler(rng)
            out.append(t)
        return out

    return times


def at_once() -> Callable[[random.Random, int], list[float]]:
    """Every item there at time 0: a batch to drain."""
    return lambda rng, n: [0.0] * n


def bursts(size: int, every: float) -> Callable[[random.Random, int], list[float]]:
    """`size` items at once every `every` seconds, from time 0."""
    if size < 1 or every <= 0:
        raise InputError("a burst needs at least 1 item and a period > 0")
    return lambda rng, n: [(i // size) * every for i in range(n)]


def replay(times: Sequence[float]) -> Callable[[random.Random, int], list[float]]:
    """Measured arrival times, shifted to start at 0; more items than measured repeat the
    pattern, each repetition after the last."""
    base = sorted(times)
    if not base:
        raise InputError("no measured arrivals to replay")
    start = base[0]
    offsets = [t - start for t in base]
    span = offsets[-1] + (statistics.fmean(_diffs(offsets)) if len(offsets) > 1 else 1.0)

    def times_(rng: random.Random, n: int) -> list[float]:
        return [(i // len(offsets)) * span + offsets[i % len(offsets)] for i in range(n)]

    return times_


def _diffs(values: Sequence[float]) -> list[float]:
    return [b - a for a, b in zip(values, values[1:], strict=False)]


# -- the simulation ------------------------------------------------------------------------


@dataclass(frozen=True)
class Simulated:
    items: int
    parallelism: int
    seed: int | None
    arrival_rate: float  # items per second over the run
    mean_interarrival_seconds: float
    mean_service_seconds: float
    utilization: float  # busy worker-time / (parallelism × time from first arrival to last end)
    mean_wait_seconds: float
    mean_wait_ci95: tuple[float, float]
    p50_wait_seconds: float
    p95_wait_seconds: float
    p99_wait_seconds: float
    mean_latency_seconds: float
    p50_latency_seconds: float
    p95_latency_seconds: float
    p99_latency_seconds: float
    max_backlog: int
    mean_backlog: float  # time-average number of items waiting (Little: = rate × mean wait)
    horizon_seconds: float
    backlog_trace: tuple[tuple[float, int], ...] = ()  # (time, items waiting), thinned

    def as_json(self) -> dict:
        out = {k: v for k, v in self.__dict__.items() if k != "backlog_trace"}
        out["mean_wait_ci95"] = list(self.mean_wait_ci95)
        return out


def simulate(
    arrivals: Callable[[random.Random, int], list[float]],
    service: Sampler,
    parallelism: int,
    items: int,
    *,
    seed: int | None = None,
    warmup: float = 0.1,
    batches: int = 20,
    trace: bool = False,
) -> Simulated:
    """Run `items` items through `parallelism` FCFS workers (see the module docstring)."""
    if not 1 <= parallelism <= MAX_PARALLELISM:
        raise InputError(f"parallelism must be from 1 to {MAX_PARALLELISM:,}")
    if not 2 <= items <= MAX_ITEMS:
        raise InputError(f"items must be from 2 to {MAX_ITEMS:,}")
    if batches not in _T975:
        raise ValueError(f"batches must be one of {sorted(_T975)}")
    rng = random.Random(seed)
    arrive = arrivals(rng, items)
    free = [arrive[0]] * parallelism  # each worker's next free time (a min-heap)
    starts, waits, latencies = [0.0] * items, [0.0] * items, [0.0] * items
    busy, end = 0.0, 0.0
    replace = heapq.heapreplace
    for i, a in enumerate(arrive):
        s = service(rng)
        start = free[0]
        if start < a:
            start = a
        done = start + s
        replace(free, done)
        starts[i] = start
        waits[i] = start - a
        latencies[i] = done - a
        busy += s
        if done > end:
            end = done
    horizon = max(end - arrive[0], 1e-12)
    max_backlog, area, points = _walk_backlog(arrive, starts, trace)
    sorted_waits, sorted_latencies = sorted(waits), sorted(latencies)
    mean_wait = math.fsum(waits) / items
    return Simulated(
        items=items,
        parallelism=parallelism,
        seed=seed,
        arrival_rate=items / horizon,
        mean_interarrival_seconds=(arrive[-1] - arrive[0]) / (items - 1),
        mean_service_seconds=busy / items,
        utilization=busy / (parallelism * horizon),
        mean_wait_seconds=mean_wait,
        mean_wait_ci95=batch_means_ci(waits, warmup=warmup, batches=batches),
        p50_wait_seconds=quantile(sorted_waits, 0.50),
        p95_wait_seconds=quantile(sorted_waits, 0.95),
        p99_wait_seconds=quantile(sorted_waits, 0.99),
        mean_latency_seconds=math.fsum(latencies) / items,
        p50_latency_seconds=quantile(sorted_latencies, 0.50),
        p95_latency_seconds=quantile(sorted_latencies, 0.95),
        p99_latency_seconds=quantile(sorted_latencies, 0.99),
        max_backlog=max_backlog,
        mean_backlog=area / horizon,
        horizon_seconds=horizon,
        backlog_trace=tuple(points),
    )


def _walk_backlog(
    arrive: list[float], starts: list[float], trace: bool
) -> tuple[int, float, list[tuple[float, int]]]:
    """Items waiting over time: +1 at each arrival, -1 at each start, both in time order (at a
    tie the start goes first, so an item that starts as it arrives never counts as waiting).
    Returns the maximum, the area under the curve
    (item-seconds of waiting) and, with `trace`, a thinned list of (time, waiting) points."""
    n = len(arrive)
    i = j = waiting = peak = 0
    area, last = 0.0, arrive[0]
    points: list[tuple[float, int]] = []
    every = max(1, (2 * n) // PLOT_POINTS)
    step = 0
    while j < n:
        if i < n and arrive[i] < starts[j]:
            t, delta = arrive[i], 1
            i += 1
        else:
            t, delta = starts[j], -1
            j += 1
        area += waiting * (t - last)
        last = t
        waiting += delta
        if waiting > peak:
            peak = waiting
        step += 1
        if trace and step % every == 0:
            points.append((t, waiting))
    return peak, area, points


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """The q-quantile of sorted values (linear interpolation between order statistics)."""
    if not sorted_values:
        return math.nan
    pos = q * (len(sorted_values) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def batch_means_ci(
    values: Sequence[float], *, warmup: float = 0.1, batches: int = 20
) -> tuple[float, float]:
    """A 95% confidence interval for the steady-state mean of a correlated series."""
    kept = values[int(len(values) * warmup) :]
    size = len(kept) // batches
    if size < 1:
        mean = statistics.fmean(values)
        return (mean, mean)
    means = [math.fsum(kept[k * size : (k + 1) * size]) / size for k in range(batches)]
    centre = statistics.fmean(means)
    variance = statistics.variance(means)
    # Batches next to each other are still correlated when they are short against the queue's
    # memory (at high utilization): widen by the AR(1) factor (1 + r1) / (1 - r1) of their
    # lag-1 autocorrelation, when it is positive.
    r1 = _lag1(means, centre)
    if r1 > 0:
        variance *= (1 + r1) / (1 - r1)
    half = _T975[batches] * math.sqrt(variance / batches)
    return (max(0.0, centre - half), centre + half)  # a wait is never negative


def _lag1(values: Sequence[float], mean: float) -> float:
    """The lag-1 autocorrelation of a series (0 when it has no spread), at most 0.9."""
    deviations = [v - mean for v in values]
    denominator = math.fsum(d * d for d in deviations)
    if denominator == 0:
        return 0.0
    numerator = math.fsum(a * b for a, b in zip(deviations, deviations[1:], strict=False))
    return min(0.9, numerator / denominator)
