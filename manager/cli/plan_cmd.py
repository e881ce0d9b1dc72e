"""`workqueue plan`: how many workers drain a batch before a deadline, and what it costs.

    workqueue plan --items 40000 --service 30s --service-cv 0.5 --deadline 6h --cost-per-hour 0.05
    workqueue plan videos/ --suffix .mp4 --from-state .workqueue --deadline 2h
    workqueue plan --source http://127.0.0.1:8080 --service 2m --deadline 1d --max-parallelism 50

The items: `--items N`, the names a source lists now (`--source URL`), or the matching files of a
folder (DIR, with `--suffix`, as the ambassador would list them). The service time: `--service`
(with `--service-cv`, default 1: exponential) or measured from a ledger (`--from-state`, its
empirical distribution). The math is `manager.planning.deadline`'s.
"""

from __future__ import annotations

import json
import os
import sys

from ..durations import parse_duration
from ..errors import InputError, UserError
from ..planning import measure
from . import report
from .argtypes import cv, positive_int
from .queues import add_from_state, measured_record


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "plan",
        help="the parallelism that drains a batch before a deadline, and its cost",
        description="Plan a batch: the smallest parallelism meeting --deadline with confidence.",
    )
    p.add_argument("dir", nargs="?", help="a folder whose matching files are the items")
    p.add_argument(
        "--suffix", action="append", dest="suffixes", help="with DIR (default .mp4), repeatable"
    )
    p.add_argument("--items", type=positive_int, help="how many items")
    p.add_argument("--source", metavar="URL", help="count the items a source lists")
    p.add_argument("--service", help="mean service time of one item, e.g. 30s")
    p.add_argument("--service-cv", type=cv, help="its coefficient of variation (default 1)")
    add_from_state(p, "service times measured")
    p.add_argument("--deadline", required=True, help="when the batch must be done, e.g. 6h")
    p.add_argument(
        "--confidence",
        type=float,
        default=0.95,
        help="how sure the drain meets the deadline (default 0.95)",
    )
    p.add_argument("--max-parallelism", type=positive_int, help="at most this many workers")
    p.add_argument("--cost-per-hour", type=float, help="price of one worker-hour")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..planning.deadline import plan

    items = count_items(args)
    service = service_times(args)
    if args.cost_per_hour is not None and not 0 <= args.cost_per_hour < float("inf"):
        raise InputError("--cost-per-hour must be a finite number >= 0")
    result = plan(
        items,
        service,
        parse_duration(args.deadline),
        confidence=args.confidence,
        max_parallelism=args.max_parallelism,
        cost_per_hour=args.cost_per_hour,
    )
    if args.json:
        json.dump(result.as_json(), sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    print(render(result))
    return 0


def count_items(args) -> int:
    given = [x for x in (args.items, args.source, args.dir) if x is not None]
    if len(given) != 1:
        raise InputError("give exactly one of --items N, --source URL or a folder")
    if args.items is not None:
        return args.items
    if args.source is not None:
        from ..sources.http import SourceClient, SourceError

        try:
            return len(SourceClient(args.source).list_items())
        except SourceError as exc:
            raise UserError(str(exc)) from None
    return count_folder(args.dir, args.suffixes or [".mp4"])


def count_folder(folder: str, suffixes: list[str]) -> int:
    from ambassador.naming import is_candidate_file_name, normalise_suffixes

    if not os.path.isdir(folder):
        raise UserError(f"not a folder: {folder}")
    try:
        wanted = normalise_suffixes(suffixes)
        with os.scandir(folder) as entries:
            return sum(
                1
                for e in entries
                if e.is_file(follow_symlinks=False) and is_candidate_file_name(e.name, wanted)
            )
    except ValueError as exc:
        raise UserError(str(exc)) from None
    except OSError as exc:
        raise UserError(f"cannot read {folder}: {exc.strerror}") from None


def service_times(args):
    """The `planning.deadline.ServiceTimes` asked for, or measured (`--from-state`)."""
    from ..planning.deadline import ServiceTimes

    if args.service and args.from_state is not None:
        raise InputError("give --service or --from-state, not both")
    if args.from_state is not None:
        return ServiceTimes.measured(measure.service_times(measured_record(args).rows))
    if not args.service:
        raise InputError("give --service (the mean processing time of one item) or --from-state")
    return ServiceTimes(
        parse_duration(args.service), 1.0 if args.service_cv is None else args.service_cv
    )


def drain_bound_at_most(result) -> float:
    """The drain bound with one worker per item: the shortest any parallelism gives."""
    from ..planning.deadline import drain_bound

    return drain_bound(result.items, result.service, result.items, result.confidence)


def render(result) -> str:
    chosen = result.chosen
    confidence = f"{result.confidence:.0%}"
    lines = [
        report.rows(
            [
                ("items", f"{result.items:,}"),
                (
                    "service",
                    f"mean {report.seconds(result.service.mean)}, cv {result.service.cv:.2f}"
                    + (" (measured)" if result.service.samples else ""),
                ),
                ("deadline", report.seconds(result.deadline_seconds)),
            ]
        ),
        "",
    ]
    if chosen is None and result.needed_parallelism is None:
        lines.append(
            f"no parallelism meets the deadline at {confidence} confidence: even one worker "
            f"per item ({result.items:,}) takes up to {report.seconds(drain_bound_at_most(result))}"
            ", because single items may run that long; allow more time or lower --confidence"
        )
    elif chosen is None:
        lines.append(
            f"cannot meet the deadline with at most {result.drains[-1].parallelism:,} workers "
            f"at {confidence} confidence: it needs {result.needed_parallelism:,}"
        )
    else:
        lines.append(
            f"recommended parallelism {chosen.parallelism}: drains in "
            f"{report.seconds(chosen.expected_seconds)} (at most "
            f"{report.seconds(chosen.bound_seconds)} with {confidence} confidence)"
        )
    lines.append("")
    header = f"{'P':>6}  {'expected drain':>14}  {'at ' + confidence:>10}  {'worker-hours':>12}"
    if result.cost_per_hour is not None:
        header += f"  {'cost':>10}"
    lines.append(header)
    for d in result.drains:
        mark = " meets" if d.bound_seconds <= result.deadline_seconds else ""
        line = (
            f"{d.parallelism:>6}  {report.seconds(d.expected_seconds):>14}  "
            f"{report.seconds(d.bound_seconds):>10}  {d.worker_hours:>12,.1f}"
        )
        if d.cost is not None:
            line += f"  {d.cost:>10,.2f}"
        lines.append(line + mark)
    return "\n".join(lines)
