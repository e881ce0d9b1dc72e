"""`workqueue simulate`: the queue simulated with the arrivals and service times you have.

    workqueue simulate --interarrival 60s --service 2m --parallelism 3 --items 100000 --seed 1
    workqueue simulate --arrivals 30/h --service 90s --service-dist lognormal --service-cv 0.4 …
    workqueue simulate --burst 500/1h --service 5s --parallelism 4 --items 20000
    workqueue simulate --from-state .workqueue --parallelism 4          (replay and resample)

Arrivals: `--arrival-dist poisson` (default), `deterministic` or `lognormal` (with
`--arrival-cv`) at the mean `--interarrival` / `--arrivals`; or `--burst N/EVERY`; or, with
`--from-state`, the ledger's own arrival times replayed. Service: `--service-dist exponential`
(default), `deterministic`, `lognormal` (with `--service-cv`), or `empirical` - resampled from the
ledger's measured times (the default with `--from-state` and no `--service`). The figures are
`manager.planning.simulate`'s; JSON keys follow the stability calculator's names.
"""

from __future__ import annotations

import json
import sys

from ..durations import parse_arrivals, parse_duration
from ..errors import InputError
from ..planning.measure import service_times
from ..planning.simulate import (
    bursts,
    deterministic,
    empirical,
    exponential,
    gaps,
    lognormal,
    replay,
    simulate,
)
from . import report
from .argtypes import cv, positive_int
from .queues import add_from_state, measured_record

ARRIVAL_DISTS = ("poisson", "deterministic", "lognormal")
SERVICE_DISTS = ("exponential", "deterministic", "lognormal", "empirical")


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "simulate",
        help="simulate the queue: waits, latencies and backlog for real distributions",
        description="A deterministic discrete-event simulation of the queue at parallelism P.",
    )
    arrivals = p.add_mutually_exclusive_group()
    arrivals.add_argument("--interarrival", help="mean time between items, e.g. 60s")
    arrivals.add_argument("--arrivals", help="arrival rate, e.g. 1440/day, 30/h")
    arrivals.add_argument(
        "--burst", metavar="N/EVERY", help="N items at once every EVERY, e.g. 500/1h"
    )
    p.add_argument("--arrival-dist", choices=ARRIVAL_DISTS, default="poisson")
    p.add_argument("--arrival-cv", type=cv, help="with --arrival-dist lognormal")
    p.add_argument("--service", help="mean service time of one item, e.g. 2m")
    p.add_argument("--service-dist", choices=SERVICE_DISTS)
    p.add_argument("--service-cv", type=cv, help="with --service-dist lognormal")
    p.add_argument("--parallelism", type=positive_int, default=1, help="workers (default 1)")
    p.add_argument(
        "--items",
        type=positive_int,
        help="items (default 100000; with --from-state, the ledger's own count)",
    )
    p.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    add_from_state(p, "replay the arrivals and resample the service times")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--plot", metavar="FILE.png", help="plot the backlog over time")
    p.set_defaults(func=run)


def run(args) -> int:
    record = measured_record(args)
    rows = record.rows if record is not None else None
    arrivals = _arrivals(args, rows, record is None or record.arrivals_known)
    service = _service(args, rows)
    items = args.items or (len(rows) if rows is not None else 100_000)
    result = simulate(
        arrivals, service, args.parallelism, items, seed=args.seed, trace=bool(args.plot)
    )
    if args.plot:
        plot(result, args.plot)
    if args.json:
        json.dump(result.as_json(), sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    lo, hi = result.mean_wait_ci95
    print(
        report.rows(
            [
                ("items", f"{result.items:,} (seed {result.seed})"),
                ("parallelism", str(result.parallelism)),
                ("interarrival", report.seconds(result.mean_interarrival_seconds) + " (mean)"),
                ("service", report.seconds(result.mean_service_seconds) + " (mean)"),
                ("utilization", f"{result.utilization:.2f}"),
                (
                    "wait",
                    f"mean {report.seconds(result.mean_wait_seconds)} "
                    f"(95% CI {report.seconds(lo)} - {report.seconds(hi)}), "
                    f"p50 {report.seconds(result.p50_wait_seconds)}, "
                    f"p95 {report.seconds(result.p95_wait_seconds)}, "
                    f"p99 {report.seconds(result.p99_wait_seconds)}",
                ),
                (
                    "latency",
                    f"mean {report.seconds(result.mean_latency_seconds)}, "
                    f"p50 {report.seconds(result.p50_latency_seconds)}, "
                    f"p95 {report.seconds(result.p95_latency_seconds)}, "
                    f"p99 {report.seconds(result.p99_latency_seconds)}",
                ),
                (
                    "backlog",
                    f"max {result.max_backlog:,} waiting, mean {result.mean_backlog:,.1f}",
                ),
            ]
        )
    )
    if args.plot:
        print(f"\nplot: {args.plot}")
    return 0


def _arrivals(args, rows, arrivals_known: bool = True):
    if args.burst:
        size, sep, every = args.burst.partition("/")
        if not sep or not size.strip().isdigit():
            raise InputError(f"--burst takes N/EVERY, e.g. 500/1h, got {args.burst!r}")
        return bursts(int(size), parse_duration(every))
    if args.interarrival or args.arrivals:
        mean = (
            parse_duration(args.interarrival)
            if args.interarrival
            else parse_arrivals(args.arrivals)
        )
        if args.arrival_dist == "deterministic":
            return gaps(deterministic(mean))
        if args.arrival_dist == "lognormal":
            if args.arrival_cv is None:
                raise InputError("--arrival-dist lognormal needs --arrival-cv")
            return gaps(
                lognormal(mean, args.arrival_cv) if args.arrival_cv else deterministic(mean)
            )
        return gaps(exponential(mean))
    if rows is not None and not arrivals_known:
        raise InputError(
            "this queue's record has no arrival times (a Job is made when its item is "
            "dispatched): give --interarrival, --arrivals or --burst with --from-state"
        )
    if rows is not None:
        return replay([r.first_seen for r in rows])
    raise InputError("give --interarrival, --arrivals or --burst (or --from-state)")


def _service(args, rows):
    dist = args.service_dist or ("empirical" if rows is not None and not args.service else None)
    if dist == "empirical":
        if rows is None:
            raise InputError("--service-dist empirical needs --from-state")
        return empirical(service_times(rows))
    if not args.service:
        raise InputError("give --service (the mean processing time of one item)")
    mean = parse_duration(args.service)
    if dist == "deterministic":
        return deterministic(mean)
    if dist == "lognormal":
        if args.service_cv is None:
            raise InputError("--service-dist lognormal needs --service-cv")
        return lognormal(mean, args.service_cv) if args.service_cv else deterministic(mean)
    return exponential(mean)


def plot(result, path: str) -> None:
    plt = report.pyplot(path)
    fig, ax = plt.subplots(figsize=(7, 4.2))
    times = [t / 3600 for t, _ in result.backlog_trace]
    ax.step(times, [n for _, n in result.backlog_trace], where="post", linewidth=0.8)
    ax.set_xlabel("time (hours)")
    ax.set_ylabel("items waiting")
    ax.set_title(
        f"{result.items:,} items, P={result.parallelism}, utilization {result.utilization:.2f}: "
        f"max backlog {result.max_backlog:,}"
    )
    ax.grid(alpha=0.3)
    fig.tight_layout()
    report.save(plt, fig, path)
