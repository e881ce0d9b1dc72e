"""`workqueue stability`: is a capped work queue stable, and how many workers does it need?

    workqueue stability --interarrival 60s --service 120s [--parallelism 3] [--json]
    workqueue stability --arrivals 1440/day --service 2m --backlog 500
    workqueue stability --from-state .workqueue [--window 1h] [--parallelism 2] [--plot p.png]
    workqueue stability --from-url http://127.0.0.1:9090

The math is in `manager.planning.scaling`, the measurement in `manager.planning.measure` (the
same figures the autoscaler and a `--once` summary use): from a ledger over the window ending
at its newest event (a ledger read after a run still describes that run), or from a running
manager's /stats. Items that all arrived together are a backlog, not a rate: the calculator
then says so and reports how long they take to drain.
"""

from __future__ import annotations

import json
import math
import sys

from ..durations import parse_arrivals, parse_duration
from ..errors import InputError, UserError
from ..planning.measure import Measured, measure, measure_rows
from ..planning.scaling import MODELS, analyse, expected_latency
from . import report
from .argtypes import cv, positive_int
from .queues import add_from_state, measured_record

MODEL_NAMES = {"mmc": "M/M/c (Erlang C)", "ggc": "G/G/c (Allen-Cunneen)"}
MODEL_NOTE = (
    "M/M/c assumes memoryless arrivals and service times (coefficient of variation "
    "1); closer to 0 means more regular than the model, so its waits are pessimistic."
)


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "stability",
        help="the stability calculator: effective service vs interarrival",
        description="Compare effective service time (service / parallelism) with the "
        "interarrival time, and recommend a parallelism.",
    )
    arrivals = p.add_mutually_exclusive_group()
    arrivals.add_argument("--interarrival", help="mean time between items, e.g. 60s, 2m, 1.5h")
    arrivals.add_argument("--arrivals", help="arrival rate, e.g. 1440/day, 30/h, 2/m, 1/s")
    p.add_argument("--service", help="mean processing time of one item, e.g. 500ms, 2m")
    p.add_argument(
        "--parallelism",
        type=int,
        help="workers at once (default 1, or the running manager's with --from-url)",
    )
    p.add_argument(
        "--target-utilization",
        type=float,
        default=0.9,
        help="the margin: stable below this utilization (default 0.9)",
    )
    p.add_argument("--backlog", type=int, help="a burst of N items to drain")
    add_from_state(p, "measure")
    p.add_argument("--from-url", metavar="URL", help="measure from a running manager")
    p.add_argument("--window", default="1h", help="measurement window (default 1h)")
    p.add_argument(
        "--model",
        choices=MODELS,
        help="mmc (Erlang C) or ggc (Allen-Cunneen with the CVs); default: ggc when both CVs "
        "are measured, else mmc",
    )
    p.add_argument("--arrival-cv", type=cv, help="interarrival coefficient of variation (ggc)")
    p.add_argument("--service-cv", type=cv, help="service coefficient of variation (ggc)")
    p.add_argument(
        "--check",
        action="store_true",
        help="also simulate the same queue and print both figures side by side",
    )
    p.add_argument(
        "--check-items", type=positive_int, default=200_000, help="items simulated (200000)"
    )
    p.add_argument("--seed", type=int, default=1, help="the simulation's seed (default 1)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument(
        "--plot",
        metavar="FILE.png",
        help="plot expected latency against parallelism (needs matplotlib)",
    )
    p.set_defaults(func=run)


# -- measurement ---------------------------------------------------------------------------


def from_state(args, window: float) -> Measured:
    """The figures of the record `--from-state` names (any backend: `cli.queues`)."""
    record = measured_record(args)
    return measure_rows(record.rows, window=window, arrivals_known=record.arrivals_known)


def from_url(url: str) -> tuple[Measured, int]:
    """The figures of a running manager's window, and the parallelism it runs at."""
    import requests

    target = url.rstrip("/") + "/stats"
    try:
        body = requests.get(target, timeout=10).json()
        figures = measure(
            body["arrival_times"], body["service_seconds"], window_seconds=body["span"]
        )
        return figures, int(body["parallelism"])
    except requests.RequestException:
        raise UserError(f"cannot reach the manager's stats at {target}") from None
    except (ValueError, KeyError, TypeError):
        raise UserError(f"{target} did not answer the manager's stats") from None


# -- output --------------------------------------------------------------------------------


def table(result, measured: Measured | None, why: str = "") -> str:
    r = result.as_json()
    lines = []
    if measured is not None:
        cv_i, cv_s = measured.cv_interarrival, measured.cv_service
        lines.append(
            f"measured over {report.seconds(measured.window_seconds)}: "
            f"{measured.arrivals} arrivals, {measured.services} finished runs"
        )
        if measured.burst:
            lines.append(
                f"  all {measured.arrivals} items arrived together: a backlog to "
                "drain, not an arrival rate"
            )
        lines.append(
            "  interarrival cv "
            + (f"{cv_i:.2f}" if cv_i is not None else "-")
            + ", service cv "
            + (f"{cv_s:.2f}" if cv_s is not None else "-")
        )
        lines.append(f"  {MODEL_NOTE}")
        lines.append("")
    interarrival = result.interarrival_seconds
    no_rate = math.isinf(interarrival)  # nothing says how fast items come: no load to judge
    if not no_rate:
        arrivals = report.seconds(interarrival)
    elif measured is not None and measured.burst:
        arrivals = f"none: the {measured.arrivals} items arrived together (a backlog, not a rate)"
    else:
        arrivals = "none (no arrivals)"
    rows = [
        ("interarrival", arrivals),
        ("service", report.seconds(result.service_seconds)),
        ("parallelism", str(result.parallelism)),
        (
            "effective service",
            f"{report.seconds(result.effective_service_seconds)}  (service / parallelism)",
        ),
        (
            "utilization",
            "-  (no arrival rate to load the workers)"
            if no_rate
            else f"{result.utilization:.2f}  (stable below {result.target_utilization:g})",
        ),
        (
            "verdict",
            "-  (no arrival rate: see drain backlog)" if no_rate else result.verdict.upper(),
        ),  # fmt: skip
        ("model", f"{MODEL_NAMES[result.model]}: {why}" if why else MODEL_NAMES[result.model]),
        (
            "recommended P",
            "-  (no arrival rate: parallelism sets how fast a backlog drains)"
            if no_rate
            else str(result.recommended_parallelism),
        ),
    ]
    rows.append(
        (
            "keeps up with",
            f"{r['max_arrivals_per_hour']:,.1f} items/hour at "
            f"utilization {result.target_utilization:g}",
        )
    )
    if "wait_probability" in r and not math.isinf(interarrival):
        rows += [
            ("P(wait)", f"{r['wait_probability']:.3f}"),
            ("mean wait", report.seconds(r["mean_wait_seconds"])),
            ("p95 wait", report.seconds(r["p95_wait_seconds"])),
            ("mean latency", report.seconds(r["mean_latency_seconds"]) + "  (wait + service)"),
        ]
    elif "backlog_growth_per_hour" in r:
        rows.append(("backlog growth", f"{r['backlog_growth_per_hour']:,.1f} items/hour"))
    if result.backlog is not None:
        rows.append(
            ("drain backlog", f"{report.seconds(result.drain_seconds)} for {result.backlog} items")
        )
    lines.append(report.rows(rows))
    return "\n".join(lines)


def plot(result, path: str) -> None:
    if math.isinf(result.interarrival_seconds):
        raise UserError("--plot needs an arrival rate (these items all arrived together)")
    plt = report.pyplot(path)
    rec = result.recommended_parallelism
    ps = list(range(1, max(2 * rec, result.parallelism + 1, 3) + 1))
    latencies = [
        expected_latency(result.interarrival_seconds, result.service_seconds, p) for p in ps
    ]
    stable = [(p, lat) for p, lat in zip(ps, latencies, strict=True) if math.isfinite(lat)]
    fig, ax = plt.subplots(figsize=(7, 4.2))
    if stable:
        ax.plot(
            [p for p, _ in stable],
            [lat for _, lat in stable],
            marker="o",
            label="expected latency (wait + service)",
        )
    ax.axhline(result.service_seconds, color="grey", linestyle=":", label="service time alone")
    unstable = [p for p, lat in zip(ps, latencies, strict=True) if not math.isfinite(lat)]
    if unstable:
        ax.axvspan(
            0.5,
            max(unstable) + 0.5,
            color="red",
            alpha=0.12,
            label="unstable: latency grows without bound",
        )
    fragile = [p for p in ps if p not in unstable and p < rec]
    if fragile:
        ax.axvspan(
            min(fragile) - 0.5,
            max(fragile) + 0.5,
            color="orange",
            alpha=0.15,
            label=f"fragile: utilization >= {result.target_utilization:g}",
        )
    rec_latency = expected_latency(result.interarrival_seconds, result.service_seconds, rec)
    load = result.service_seconds / result.interarrival_seconds
    for p, lat in stable:  # the margin, point by point: utilization at each parallelism
        ax.annotate(
            f"ρ={load / p:.2f}",
            (p, lat),
            textcoords="offset points",
            xytext=(0, 8),
            ha="center",
            fontsize="x-small",
        )
    ax.plot(
        [rec],
        [rec_latency],
        marker="*",
        markersize=16,
        color="green",
        linestyle="none",
        label=f"recommended P={rec} (utilization {load / rec:.2f} "
        f"<= {result.target_utilization:g})",
    )
    ax.set_xlabel("parallelism (workers)")
    ax.set_ylabel("expected latency per item (seconds)")
    ax.set_title(
        f"interarrival {report.seconds(result.interarrival_seconds)}, "
        f"service {report.seconds(result.service_seconds)}"
    )
    ax.set_xticks(ps)
    ax.margins(y=0.12)
    ax.legend(fontsize="small")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    report.save(plt, fig, path)


# -- the command ---------------------------------------------------------------------------


def run(args) -> int:
    measured, running_at = None, None
    window = parse_duration(args.window)
    if args.from_state is not None and args.from_url:
        raise UserError("give --from-state or --from-url, not both")
    if args.from_state is not None:
        measured = from_state(args, window)
    elif args.from_url:
        measured, running_at = from_url(args.from_url)
    if args.interarrival:
        interarrival = parse_duration(args.interarrival)
    elif args.arrivals:
        interarrival = parse_arrivals(args.arrivals)
    elif measured is not None:
        interarrival = measured.interarrival_seconds
    else:
        raise InputError("give --interarrival or --arrivals (or --from-state/--from-url)")
    if args.service:
        service = parse_duration(args.service)
    elif measured is not None and measured.service_seconds is not None:
        service = measured.service_seconds
    elif measured is not None:
        raise InputError("no finished runs to measure a service time from; give --service")
    else:
        raise InputError("give --service (the mean processing time of one item)")
    parallelism = args.parallelism
    if parallelism is None:
        parallelism = running_at or 1
    backlog = args.backlog
    if backlog is None and measured is not None and measured.burst:
        backlog = measured.arrivals
    model, arrival_cv, service_cv, why = choose_model(args, measured)
    result = analyse(
        interarrival,
        service,
        parallelism,
        target_utilization=args.target_utilization,
        backlog=backlog,
        model=model,
        arrival_cv=arrival_cv,
        service_cv=service_cv,
    )
    simulated = check(result, args) if args.check else None
    if args.plot:
        plot(result, args.plot)
    if args.json:
        body = result.as_json()
        body.update(model_reason=why, arrival_cv=arrival_cv, service_cv=service_cv)
        if measured is not None:
            body["measured"] = measured.as_json()
            if running_at is not None:
                body["measured"]["parallelism"] = running_at
        if simulated is not None:
            body["check"] = simulated.as_json()
        json.dump(body, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(table(result, measured, why))
        if simulated is not None:
            print("\n" + side_by_side(result, simulated))
        if args.plot:
            print(f"\nplot: {args.plot}")
    return 0


def choose_model(args, measured: Measured | None) -> tuple[str, float, float, str]:
    """(model, arrival cv, service cv, why): ggc when asked or when both CVs were measured."""
    got_a = measured.cv_interarrival if measured is not None else None
    got_s = measured.cv_service if measured is not None else None
    ca = args.arrival_cv if args.arrival_cv is not None else got_a
    cs = args.service_cv if args.service_cv is not None else got_s
    if args.model == "mmc":
        return "mmc", 1.0, 1.0, "asked for (--model mmc)"
    if args.model == "ggc":
        if ca is None or cs is None:
            raise InputError("--model ggc needs both CVs: give --arrival-cv and --service-cv")
        return "ggc", ca, cs, f"asked for (--model ggc), arrival cv {ca:.2f}, service cv {cs:.2f}"
    if got_a is not None and got_s is not None:
        return "ggc", ca, cs, f"both CVs measured (arrival {ca:.2f}, service {cs:.2f})"
    given = args.arrival_cv is not None or args.service_cv is not None
    hint = "; --model ggc uses the CVs given" if given else ""
    return "mmc", 1.0, 1.0, f"the CVs were not both measured{hint}"


def check(result, args):
    """The same queue, simulated: Poisson-like arrivals and service with the model's CVs."""
    from ..planning.simulate import gaps, simulate, with_cv

    if math.isinf(result.interarrival_seconds):
        raise UserError("--check needs an arrival rate (these items all arrived together)")
    return simulate(
        gaps(with_cv(result.interarrival_seconds, result.arrival_cv)),
        with_cv(result.service_seconds, result.service_cv),
        result.parallelism,
        args.check_items,
        seed=args.seed,
    )


def side_by_side(result, simulated) -> str:
    lo, hi = simulated.mean_wait_ci95
    formula = result.as_json()
    pairs = [
        ("", f"{'formula':<10}  simulated ({simulated.items:,} items, seed {simulated.seed})"),
        (
            "mean wait",
            f"{report.seconds(formula.get('mean_wait_seconds')):<10}  "
            f"{report.seconds(simulated.mean_wait_seconds)}  "
            f"(95% CI {report.seconds(lo)} - {report.seconds(hi)})",
        ),
        (
            "p95 wait",
            f"{report.seconds(formula.get('p95_wait_seconds')):<10}  "
            f"{report.seconds(simulated.p95_wait_seconds)}",
        ),
        (
            "mean latency",
            f"{report.seconds(formula.get('mean_latency_seconds')):<10}  "
            f"{report.seconds(simulated.mean_latency_seconds)}",
        ),
        ("utilization", f"{result.utilization:<10.2f}  {simulated.utilization:.2f}"),
    ]
    return "check:\n" + report.rows(pairs)
