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
from collections import Counter

from ..durations import parse_duration
from ..errors import InputError, UserError
from ..planning import measure
from ..runtime.run_options import BY_FLAG
from . import report
from .argtypes import add_row, cv, positive_int
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
    # the manager's own --group and --limit (`manager.runtime.run_options`)
    add_row(
        p,
        BY_FLAG["--group"],
        help="an item's group is the first capture of REGEX on its "
        "name (with --limit: a capped group drains no faster than its limit allows)",
    )
    add_row(p, BY_FLAG["--limit"], help="the group limits, as the manager's --limit "
            "(repeatable)")  # fmt: skip
    p.add_argument("--max-parallelism", type=positive_int, help="at most this many workers")
    p.add_argument("--cost-per-hour", type=float, help="price of one worker-hour")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..planning.deadline import plan

    items, names = count_items(args)
    groups = limited_groups(args, names)
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
        groups=groups,
    )
    if args.json:
        json.dump(result.as_json(), sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    print(render(result))
    return 0


def count_items(args) -> tuple[int, list[str] | None]:
    """How many items, and their names (None with --items N)."""
    from .typed_secrets import no_password_in_source

    no_password_in_source(args)
    given = [x for x in (args.items, args.source, args.dir) if x is not None]
    if len(given) != 1:
        raise InputError("give exactly one of --items N, --source URL or a folder")
    if args.items is not None:
        return args.items, None
    if args.source is not None:
        from ..sources.http import SourceClient, SourceError

        try:
            names = SourceClient(args.source).list_items()
        except SourceError as exc:
            raise UserError(str(exc)) from None
        return len(names), names
    names = folder_names(args.dir, args.suffixes or [".mp4"])
    return len(names), names


def limited_groups(args, names: list[str] | None) -> dict[str, tuple[int, int]] | None:
    """{group: (its items, its limit)} of the groups a --limit caps, or None."""
    if not args.limits:
        return None
    if names is None or args.group is None:
        raise InputError("--limit needs the items' names and --group (give --source URL or a "
                         "folder, and --group REGEX)")  # fmt: skip
    from ..tenancy.rules import Grouping, GroupRules, TenancyOptions

    grouping = Grouping(args.group.pattern)
    limits = GroupRules(TenancyOptions(limits=args.limits))
    found: dict[str, tuple[int, int]] = {}
    for group, count in Counter(map(grouping.of, names)).items():
        limit = limits.of(group)[0]
        if group is not None and limit is not None:
            found[group] = (count, limit)
    return found


def folder_names(folder: str, suffixes: list[str]) -> list[str]:
    from kube_workqueue.ambassador.naming import is_candidate_file_name, normalise_suffixes

    if not os.path.isdir(folder):
        raise UserError(f"not a folder: {folder}")
    try:
        wanted = normalise_suffixes(suffixes)
        with os.scandir(folder) as entries:
            return [
                e.name
                for e in entries
                if e.is_file(follow_symlinks=False) and is_candidate_file_name(e.name, wanted)
            ]
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
    if (
        chosen is None
        and result.capped_by is not None
        and result.capped_by[2] > result.deadline_seconds
    ):
        group, limit, bound = result.capped_by
        if limit < 1:
            lines.append(
                f"no parallelism meets the deadline: group {group} is held (--limit with 0): "
                "its items never start until it is given a limit (workqueue scale --limit)"
            )
        else:
            lines.append(
                f"no parallelism meets the deadline at {confidence} confidence: group {group}, "
                f"capped at {limit} at once (--limit), takes up to {report.seconds(bound)} "
                "alone"
            )
    elif chosen is None and result.needed_parallelism is None:
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
    if result.capped_by is not None and result.capped_by[2] < float("inf"):
        group, limit, bound = result.capped_by
        lines.append(f"group {group} is capped at {limit} at once (--limit): no drain is "
                     f"shorter than its own, up to {report.seconds(bound)}")  # fmt: skip
    lines.append("")
    header = f"{'P':>6}  {'expected drain':>14}  {'at ' + confidence:>10}  {'worker-hours':>12}"
    if result.cost_per_hour is not None:
        header += f"  {'cost':>10}"
    lines.append(header)
    for d in result.drains:
        mark = " meets" if d.bound_seconds <= result.deadline_seconds else ""
        line = (
            f"{d.parallelism:>6}  {report.seconds(d.expected_seconds):>14}  "
            f"{report.seconds(d.bound_seconds):>10}  "
            + (f"{d.worker_hours:>12,.1f}" if d.worker_hours != float("inf") else f"{'-':>12}")
        )
        if d.cost is not None:
            line += f"  {d.cost:>10,.2f}"
        lines.append(line + mark)
    return "\n".join(lines)
