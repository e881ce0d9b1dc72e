"""`workqueue status` and `workqueue retry`: read or change a queue's record, on any backend.

    workqueue status [NAME] [--json] [--state-dir DIR] [--recent N] [--source URL]
    workqueue status [NAME] [--json] --backend kubernetes --namespace NS --queue Q
    workqueue retry NAME | --failed | --matching GLOB [--state-dir DIR]
    workqueue retry NAME | --failed | --matching GLOB --backend kubernetes --namespace NS --queue Q
    workqueue pause | resume | scale --parallelism N    [the queue's options, as above]
    workqueue drain MANAGER [--undo] --ledger URL       (one manager of a shared ledger)

Both dispatch through the backend registry: each backend's `Queue` options name the queue, and
its `queue_ops(queue)` (a `manager.queue_ops.QueueOps`) answers: `status()` with the
record `manager.views.queue_view` turns into the same reasons, positions and forecast on every
backend (`--json` prints its `as_json()`), `retry()` with a line for people. An unknown item
is one line and exit 2 on every backend.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

from ..durations import moment
from ..errors import UserError
from ..ports import FINISHED, State
from ..runtime.run_options import ASKED_PARALLELISM, BY_FLAG
from .argtypes import MAX_WORKERS, add_row, from_input, positive_int
from .queues import add_queue_options, queue_of
from .report import one_line, rows, seconds
from .typed_secrets import no_password_in_source

if TYPE_CHECKING:
    from ..views.queue_view import ItemView, QueueView


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "status",
        help="where every item is, why, and when the waiting ones will run",
        description="Counts by state, each item's reason in words, positions and predicted "
        "starts of waiting items, and a forecast from the measured service times.",
    )
    p.add_argument("name", nargs="?", help="one item: its state, reason, and log tail or pod")
    p.add_argument(
        "--json", action="store_true", help="one JSON object (schema: docs/status.schema.json)"
    )
    p.add_argument(
        "--recent", type=positive_int, default=10, help="finished items to show (default 10)"
    )
    p.add_argument(
        "--waiting",
        type=positive_int,
        default=None,
        help="waiting items to show (default 10; with --json every item unless given: the "
        "first N in line, the rest counted in items_left_out)",
    )
    p.add_argument(
        "--source",
        help="also ask this ambassador what it lists: items no manager has seen yet are "
        "pending (on Kubernetes, the only way to name items whose Job is gone)",
    )
    add_queue_options(p)
    p.set_defaults(func=show_status)

    for command, what in (
        ("pause", "hold the queue: running work finishes, nothing new starts"),
        ("resume", "let a paused queue dispatch again"),
    ):
        p = subparsers.add_parser(command, help=what, description=what)
        if command == "resume":
            p.add_argument(
                "--accept-removals",
                action="store_true",
                help="also let the manager act at once on removals it holds (--cancel-removed "
                "after a source suddenly lost most of its items)",
            )
        add_queue_options(p)
        p.set_defaults(func=hold_or_release, action=command, accept_removals=False)

    what = "ask one manager of a shared ledger to take nothing new; the others take the rest"
    p = subparsers.add_parser(
        "drain",
        help=what,
        description=f"{what}. The manager finishes what it holds, takes nothing new (from "
        "the moment this command returns), and stays drained across its restarts until "
        "--undo; status shows it draining, then drained. Its id is the one status lists.",
    )
    p.add_argument("manager", help="the manager's id, as workqueue status lists it")
    p.add_argument("--undo", action="store_true", help="let the manager take work again")
    add_queue_options(p)
    p.set_defaults(func=drain_manager)

    what = "set the queue's parallelism while it runs (0: nothing new starts)"
    p = subparsers.add_parser(
        "scale",
        help=what,
        description=f"{what}. Its running manager follows within a second (on Kubernetes "
        "through the WorkQueue's scale subresource, as kubectl scale, an HPA or KEDA would), and "
        "a manager started later starts with it.",
    )
    # the manager's --parallelism, as a WorkQueue's spec.parallelism takes it: 0 holds the queue
    add_row(p, BY_FLAG["--parallelism"], type=from_input(ASKED_PARALLELISM.parse), default=None,
            help=f"0 to {MAX_WORKERS}")  # fmt: skip
    # the manager's own --limit and --rate (`manager.runtime.run_options`), asked of the queue
    add_row(
        p,
        BY_FLAG["--limit"],
        default=None,
        help="the queue's group limits from now on, "
        "in place of its managers' --limit (repeatable, first match wins; 0 holds a group)",
    )
    add_row(p, BY_FLAG["--rate"], default=None, help="the queue's group rates from now on, in "
            "place of its managers' --rate (repeatable)")  # fmt: skip
    p.add_argument("--no-limits", action="store_true", help="no group limits from now on")
    p.add_argument("--no-rates", action="store_true", help="no group rates from now on")
    add_queue_options(p)
    p.set_defaults(func=scale_queue)

    p = subparsers.add_parser("retry", help="run failed items again")
    p.add_argument("name", nargs="?", help="the item's name")
    which = p.add_argument_group("several at once (instead of NAME)")
    which.add_argument("--failed", action="store_true", help="every failed item")
    which.add_argument("--matching", metavar="GLOB", help="failed items whose name matches")
    which.add_argument(
        "--source", help="also name failed items whose Job is gone from this ambassador's list"
    )
    add_queue_options(p)
    p.set_defaults(func=retry_item)


def _listed(source: str | None) -> tuple[list[str] | None, dict[str, int]]:
    """The names `source` lists and their priorities (not 0), or (None, {})."""
    if source is None:
        return None, {}
    from ..sources.http import SourceClient, SourceError

    client = SourceClient(source)
    try:
        return client.list_items(), client.listed_priorities()
    except SourceError as exc:
        raise UserError(f"cannot list the items of {source}: {exc}") from None


def show_status(args) -> int:
    from ..views.queue_view import from_record

    backend, queue = queue_of(args)
    no_password_in_source(args)
    listed, priorities = _listed(args.source)
    with backend.queue_ops(queue) as ops:  # one ledger, or one API client, for both reads
        record = ops.status(listed)
        view = from_record(record, time.time(), listed, priorities)
        if args.name is None:
            if args.json:
                print(json.dumps(view.as_json(waiting=args.waiting), indent=2))
            else:
                waiting = args.waiting if args.waiting is not None else 10
                print_status(view, recent=args.recent, waiting=waiting)
            return 0
        item = next((i for i in view.items if i.name == args.name), None)
        if item is None:
            raise UserError(f"no item named {args.name!r} in {view.where}")
        detail = ops.item_detail(item.name, record)
    if args.json:
        print(json.dumps({**item.as_json(), **detail}, indent=2))
    else:
        print_item(item, detail)
    return 0


def print_status(view: QueueView, *, recent: int = 10, waiting: int = 10) -> None:
    counts = view.counts
    total = sum(counts.values())
    print(f"{total} items in {view.where}: " + ", ".join(f"{n} {s}" for s, n in counts.items()))
    manager = view.extra.get("manager")
    forecast = view.forecast
    if manager and len(manager.get("managers") or ()) > 1:
        print(f"managers: {', '.join(manager['managers'])}, parallelism {forecast.parallelism}")
    elif manager:
        print(
            f"manager: pid {manager.get('pid')} on {manager.get('host')}, "
            f"parallelism {forecast.parallelism}"
        )
    else:
        print("manager: none is running this queue")
    told = (manager or {}).get("source_log") or {}
    if isinstance(told.get("startedOver"), dict):
        from ..runtime.poller import started_over_line  # (not at import: the parser's cost)

        print(f"source: {started_over_line(told['startedOver'])}")
    for quiet in view.extra.get("silent_managers") or ():
        print(f"manager {quiet['id']}: not heard from for {seconds(quiet['heard_seconds'])} "
              f"(its claims go back to the line once it has been silent for its lease, "
              f"{seconds(quiet['lease_seconds'])})")  # fmt: skip
    for manager_id, offers in (view.extra.get("manager_offers") or {}).items():
        said = ", ".join(f"{key}={value}" for key, value in sorted(offers.items()))
        print(f"manager {manager_id} offers {said}")
    for drain in view.extra.get("draining_managers") or ():
        since = seconds(drain["since_seconds"])
        if drain["holding"]:
            print(f"manager {drain['id']}: draining for {since}, {drain['holding']} item(s) "
                  "still its own; it takes nothing new")  # fmt: skip
        else:
            print(f"manager {drain['id']}: drained (for {since}; it holds nothing and takes "
                  f"nothing: workqueue drain --undo {drain['id']})")  # fmt: skip
    if view.paused_since:
        since = moment(view.paused_since, date=True)
        print(f"paused since {since}: running work finishes, nothing new starts (workqueue resume)")
    if view.held and manager:
        print(f"held: {view.held}")
    if view.removals_held and manager:
        print(f"removals {view.removals_held}")
    if forecast.service_seconds is not None:
        parts = [f"mean service {seconds(forecast.service_seconds)}"]
        if forecast.drain_seconds is not None:
            parts.append(f"drains in {seconds(forecast.drain_seconds)}")
        if forecast.utilization is not None:
            parts.append(f"utilization {forecast.utilization:.2f} ({forecast.verdict})")
            parts.append(f"recommended parallelism {forecast.recommended_parallelism}")
        elif manager:
            parts.append("no arrival rate yet (what waits is a backlog)")
        print("forecast: " + "; ".join(parts))
    print_groups(view.extra.get("groups") or {})
    running = view.in_state(State.RUNNING)
    if running:
        print("\nrunning:")
        for item in running:
            print(f"  {item.name}  {item.reason}")
    line = view.waiting()
    if line:
        print(f"\nwaiting ({len(line)}, in order):")
        for item in line[:waiting]:
            eta = f"starts in {seconds(item.eta_seconds)}" if item.eta_seconds is not None else ""
            ranked = f"priority {item.priority}; " if item.priority else ""
            if item.group is not None:
                ranked = f"group {item.group}; {ranked}"
            print(
                f"  {item.position:>4}. {item.name}  {ranked}{eta}{'; ' if eta else ''}"
                f"{item.reason}"
            )
        if len(line) > waiting:
            print(f"        … and {len(line) - waiting} more")
    held = [i for i in view.items if i.position is None and i.reason.startswith("held:")]
    if held:
        print(f"\nheld ({len(held)}): {held[0].reason[len('held: ') :]}")
        for item in held[:waiting]:
            print(f"  {item.name}")
        if len(held) > waiting:
            print(f"  … and {len(held) - waiting} more")
    failed = [i for i in view.in_state(State.FAILED) if i.position is None
              and not i.reason.startswith("held:")]  # fmt: skip
    if failed:
        print("\nfailed:")
        for item in failed:
            print(f"  {item.name}: {item.reason}  log: {item.log}")
    done = sorted(
        (i for i in view.items if i.state in FINISHED and i.since),
        key=lambda i: i.since,
        reverse=True,
    )
    if done:
        print("\nrecent:")
        for item in done[:recent]:
            print(f"  {item.state:9} {item.name}  {item.reason}")


def print_groups(groups: dict[str, dict]) -> None:
    """One line per group: what it runs and what waits, its rules, and what holds it."""
    if not groups:
        return
    print("\ngroups:")
    for name, group in groups.items():
        rules = [f"limit {group['limit']}"] if group["limit"] is not None else []
        rules += [f"rate {group['rate']}"] if group["rate"] else []
        rules += [f"weight {group['weight']:g}"] if group["weight"] != 1 else []
        held = f"; held: {group['held']}" if group["held"] else ""
        print(f"  {name}: {group['running']} running, {group['waiting']} waiting"
              f"{' (' + ', '.join(rules) + ')' if rules else ''}{held}")  # fmt: skip


def print_item(item: ItemView, detail: dict) -> None:
    pairs = [("item", item.name), ("state", item.state), ("reason", item.reason)]
    pairs.append(("attempts", str(item.attempts)))
    if item.since:
        pairs.append(("since", moment(item.since, date=True)))
    if item.priority:
        pairs.append(("priority", str(item.priority)))
    if item.group is not None:
        pairs.append(("group", item.group))
    if item.position is not None:
        eta = seconds(item.eta_seconds) if item.eta_seconds is not None else "unknown"
        pairs += [("position", str(item.position)), ("expected start", f"in {eta}")]
    if item.exit_code is not None:
        pairs.append(("exit code", str(item.exit_code)))
    if item.log:
        pairs.append(("log", item.log))
    pod = detail.get("pod")
    if detail.get("job"):
        pairs.append(("job", detail["job"]))
    if pod:
        pairs.append(("pod", f"{pod['name']} ({pod.get('phase')}, node {pod.get('node') or '-'})"))
        for c in pod.get("containers") or []:
            state = c["state"] + (f" {c['reason']}" if c.get("reason") else "")
            if c.get("exit_code") is not None:
                state += f" exit code {c['exit_code']}"
            pairs.append((f"  container {c['name']}", state))
    for run in detail.get("versions") or []:
        when = f", finished {moment(run['finished'], date=True)}" if run.get("finished") else ""
        pairs.append(
            (
                "ran at version",
                f"{run['version'] or 'unknown'} ({run['state']}, {run['attempts']} "
                f"attempt{'s' * (run['attempts'] != 1)}{when})",
            )
        )
    print(rows(pairs))
    if detail.get("log_error"):
        print(detail["log_error"])
    tail = detail.get("log_tail")
    if tail:
        print(f"\nlog (last {len(tail)} lines):")
        for line in tail:
            print(f"  {one_line(line)}")


def retry_item(args) -> int:
    backend, queue = queue_of(args)
    several = args.failed or args.matching is not None
    if (args.name is None) == (not several):
        raise UserError("give the item's NAME, or --failed, or --matching GLOB")
    no_password_in_source(args)
    listed = _listed(args.source)[0] if args.name is None else None
    with backend.queue_ops(queue) as ops:
        if args.name is not None:
            print(ops.retry(args.name))
            return 0
        names = ops.retry_many(matching=args.matching, listed=listed)
    if not names:
        which = f" matching {args.matching!r}" if args.matching is not None else ""
        print(f"nothing to retry: no failed item{which}")
        return 0
    print(f"{len(names)} item(s) will run again: " + ", ".join(names))
    return 0


def scale_queue(args) -> int:
    """`workqueue scale --parallelism N` and/or `--limit`/`--rate`, on any backend, with or
    without a manager."""
    limits = [] if args.no_limits else args.limits
    rates = [] if args.no_rates else args.rates
    if args.no_limits and args.limits or args.no_rates and args.rates:
        raise UserError("give --limit or --no-limits, not both (likewise --rate, --no-rates)")
    if args.parallelism is None and limits is None and rates is None:
        raise UserError("scale what? give --parallelism N, --limit GLOB=N or --rate GLOB=N/PERIOD")
    backend, queue = queue_of(args)
    with backend.queue_ops(queue) as ops:
        if args.parallelism is not None:
            print(ops.scale(args.parallelism))
        if limits is not None or rates is not None:
            print(ops.scale_groups(limits=limits, rates=rates))
        if ops.made:
            print(ops.made)
    return 0


def drain_manager(args) -> int:
    """`workqueue drain MANAGER [--undo]`: only a shared ledger has managers to drain."""
    backend, queue = queue_of(args)
    with backend.queue_ops(queue) as ops:
        print(ops.drain(args.manager, undo=args.undo))
        if ops.made:
            print(ops.made)
    return 0


def hold_or_release(args) -> int:
    """`workqueue pause` / `workqueue resume`, on any backend, with or without a manager."""
    backend, queue = queue_of(args)
    with backend.queue_ops(queue) as ops:
        if args.action == "pause":
            print(ops.pause())
        else:
            print(ops.resume(accept_removals=args.accept_removals))
        if ops.made:
            print(ops.made)
    return 0
