"""Benchmark of the simulator (manager.planning.simulate): its speed, and the Allen-Cunneen G/G/c
approximation of `workqueue stability --model ggc` held against it.

1. Items per second of simulation: 1,000,000 items of M/M/3 and of lognormal G/G/4 (goal: a
   million items in <= 10 s), beside a bare loop that only draws the same random numbers - the
   floor of any simulation written in Python with the standard library.
2. Allen-Cunneen against the simulator, on a grid of arrival and service CVs (0, 0.5, 1, 2) and
   utilizations (0.5, 0.8, 0.9), at 4 workers: the formula's mean wait, the simulated one (200,000
   items, seed 1, with its 95% interval), and the error, formula / simulated - 1. Where the
   formula is poor, the table says so.

Run: .venv/bin/python -m bench.simulate [--quick]
"""

from __future__ import annotations

import argparse
import random
import time

from bench import parsed
from kube_workqueue.manager.planning.scaling import analyse
from kube_workqueue.manager.planning.simulate import exponential, gaps, lognormal, simulate, with_cv


def speed(items: int) -> None:
    print(f"simulation speed, {items:,} items")
    rng = random.Random(1)
    start = time.perf_counter()
    for _ in range(items):
        rng.expovariate(1.0)
        rng.expovariate(1.0)
    floor = time.perf_counter() - start
    cases = [
        ("M/M/3, utilization 0.8", gaps(exponential(1.25)), exponential(3.0), 3),
        ("lognormal G/G/4 (cv 0.5 / 1.5), 0.9", gaps(lognormal(1.0, 0.5)), lognormal(3.6, 1.5), 4),
    ]
    for label, arrivals, service, workers in cases:
        start = time.perf_counter()
        simulate(arrivals, service, workers, items, seed=1)
        took = time.perf_counter() - start
        print(f"  {label:<38} {took:6.2f} s  {items / took:>12,.0f} items/s")
    print(f"  {'floor: drawing the random numbers only':<38} {floor:6.2f} s  "
          f"{items / floor:>12,.0f} items/s")  # fmt: skip


def allen_cunneen(items: int) -> None:
    workers = 4
    print(f"\nAllen-Cunneen (formula) vs simulation ({items:,} items, seed 1), {workers} workers")
    print(f"{'ca':>4} {'cs':>4} {'rho':>5} {'formula':>9} {'simulated':>10} "
          f"{'95% interval':>19} {'error':>8}")  # fmt: skip
    worst = []
    for rho in (0.5, 0.8, 0.9):
        for ca in (0.0, 0.5, 1.0, 2.0):
            for cs in (0.0, 0.5, 1.0, 2.0):
                service = 1.0
                interarrival = service / (workers * rho)
                formula = analyse(
                    interarrival, service, workers, model="ggc", arrival_cv=ca, service_cv=cs
                ).mean_wait_seconds
                run = simulate(
                    gaps(with_cv(interarrival, ca)),
                    with_cv(service, cs),
                    workers,
                    items,
                    seed=1,
                )
                lo, hi = run.mean_wait_ci95
                sim = run.mean_wait_seconds
                error = formula / sim - 1 if sim > 0 else float("nan")
                if sim == 0 and formula == 0:
                    error = 0.0
                worst.append((abs(error), ca, cs, rho))
                print(f"{ca:>4.1f} {cs:>4.1f} {rho:>5.2f} {formula:>9.3f} {sim:>10.3f} "
                      f"{f'[{lo:.3f}, {hi:.3f}]':>19} {error:>+8.1%}")  # fmt: skip
    worst.sort(reverse=True)
    print("largest errors: " + ", ".join(
        f"ca {ca:g} cs {cs:g} rho {rho:g}: {e:.0%}" for e, ca, cs, rho in worst[:4]
    ))  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args = parsed(parser, {})
    speed(10_000 if args.quick else 1_000_000)
    allen_cunneen(2_000 if args.quick else 200_000)


if __name__ == "__main__":
    main()
