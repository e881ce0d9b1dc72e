"""`workqueue manager`: the manager against any source, on any backend; and the run options it
shares with `workqueue run`.

    workqueue manager --source URL --backend local --worker-cmd "CMD ARGS" [--parallelism N]
                      [--state-dir DIR] [--timeout 30s] [--max-attempts N] [--once] [--watch] …
    workqueue manager --source URL --backend kubernetes --namespace NS --queue Q --image IMG …

The flags become typed options here, at the edge: `ManagerOptions` for the core, the chosen
backend's own options (declared in its package, built by `manager.declared.from_words`), and the
stats endpoint. A `--once` run exits 0 when every item succeeded, 1 when any failed, 128+N when
interrupted by signal N; a manager that lost its leadership exits 1.
"""

from __future__ import annotations

import argparse
import logging
import signal
import threading
from typing import TYPE_CHECKING

from .. import backends
from ..declared import from_words
from ..errors import UserError
from ..faults import StorageFault
from .argtypes import (
    add_declared,
    duration,
    fraction_below_one,
    from_input,
    host,
    positive_int,
    priority_rule,
    token,
    workers,
)
from .interrupts import STOP_SIGNALS

if TYPE_CHECKING:  # the manager itself is imported when a command runs, not to parse flags:
    # building the parser must not import prometheus-client before `workqueue ambassador` has
    # set up its multiprocess directory (and `--help` stays fast)
    from ..assembly import StatsEndpoint
    from ..runtime.runner import Manager, ManagerOptions

log = logging.getLogger(__name__)


def port_number(text: str) -> int:
    if not text.isdigit() or not 0 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"not a port number (0-65535): {text!r}")
    return int(text)


def add_run_options(p: argparse.ArgumentParser) -> None:
    """The options of running a manager, shared by `manager` and `run`; read them back with
    `manager_options(args)` and `stats_endpoint(args)`."""
    p.add_argument(
        "--parallelism", type=workers, default=2, help="units of work at once (default 2)"
    )
    p.add_argument(
        "--max-attempts",
        type=positive_int,
        default=3,
        help="tries per item before it stays failed (default 3)",
    )
    p.add_argument(
        "--priority",
        type=priority_rule,
        action="append",
        default=[],
        metavar="GLOB=N",
        dest="priorities",
        help="items whose name matches GLOB start before lower priorities (higher first; "
        "repeatable, the first match wins over the source's priority; default 0)",
    )
    add_tenancy_options(p)
    p.add_argument(
        "--retry-backoff",
        type=duration,
        default=1.0,
        help="first retry delay, doubling per failure (default 1s)",
    )
    p.add_argument(
        "--grace",
        type=duration,
        default=10.0,
        help="how long running work may finish on SIGTERM/SIGINT (default 10s)",
    )
    p.add_argument(
        "--autoscale",
        action="store_true",
        help="move parallelism to the stability recommendation as times are measured",
    )
    p.add_argument("--min-parallelism", type=workers, default=1, help="autoscale floor (default 1)")
    p.add_argument(
        "--max-parallelism", type=workers, help="autoscale ceiling (default: --parallelism)"
    )
    p.add_argument(
        "--scale-interval",
        type=duration,
        default=30.0,
        help="how often the autoscaler decides (default 30s)",
    )
    p.add_argument(
        "--scale-down-delay",
        type=duration,
        default=300.0,
        help="how long a lower recommendation must hold before scaling down (5m)",
    )
    p.add_argument(
        "--scale-window",
        type=duration,
        default=600.0,
        help="how far back arrivals and service times are measured (default 10m)",
    )
    p.add_argument(
        "--on-change",
        choices=("ignore", "rerun"),
        default="ignore",
        help="a finished item whose version changes (new bytes, a new upload): ignore it "
        "(default) or run it again",
    )
    p.add_argument(
        "--cancel-removed",
        action="store_true",
        help="an item that leaves the source is cancelled: never started if it waits, ended "
        "if it runs (told only by a newer complete listing or a DELETED event)",
    )
    guard = p.add_argument_group(
        "a source that suddenly empties (with --cancel-removed)",
        "A listing that loses every item known, or more than --mass-removal-fraction of them "
        "and at least --mass-removal-min, is held: nothing is cancelled until it has lasted "
        "--removal-hold, or `workqueue resume --accept-removals` accepts it.",
    )
    guard.add_argument(
        "--removal-hold",
        type=duration,
        default=300.0,
        help="how long such a loss must persist before its items are cancelled (default 5m)",
    )
    guard.add_argument(
        "--mass-removal-fraction",
        type=fraction_below_one,
        default=0.5,
        help="the share of known items lost at once that is held (default 0.5)",
    )
    guard.add_argument(
        "--mass-removal-min",
        type=positive_int,
        default=10,
        help="the fewest items lost at once that are held, unless all are (default 10)",
    )
    guard.add_argument(
        "--accept-removals",
        action="store_true",
        help="hold nothing: act on every removal at once, however many items leave together",
    )
    p.add_argument(
        "--metrics-port",
        type=port_number,
        help="serve the dashboard (/), /metrics, /stats and /healthz on this port (0 = any free)",
    )
    p.add_argument(
        "--metrics-host",
        type=host,
        default="127.0.0.1",
        help="the address --metrics-port binds (default 127.0.0.1; 0.0.0.0 in a pod)",
    )
    p.add_argument(
        "--allowed-host",
        action="append",
        metavar="NAME",
        help="a host name the endpoint answers to besides its addresses and localhost (an "
        "Ingress's, a Service's); any other is refused (DNS rebinding); repeatable",
    )
    p.add_argument(
        "--ui-token",
        type=token,
        help="bearer token the dashboard at / asks for (required to see it when "
        "--metrics-host is beyond loopback; /metrics stays open): from WORKQUEUE_UI_TOKEN "
        "only - on the command line every user of the machine reads it",
    )
    p.add_argument(
        "--ui-token-file",
        metavar="FILE",
        help="read --ui-token from this file (a mounted Secret: kept out of the environment)",
    )


def add_tenancy_options(p: argparse.ArgumentParser) -> None:
    """--group, --limit, --rate, --fair, --weight (`manager.tenancy`)."""
    from ..tenancy import rules

    p.add_argument(
        "--group",
        type=from_input(rules.group_pattern),
        metavar="REGEX",
        help="an item's group (tenant) is the first capture of REGEX on its name, e.g. "
        "'^([^/]+)/' (else the source's data.group; else none)",
    )
    p.add_argument(
        "--limit",
        type=from_input(rules.limit_rule),
        action="append",
        default=[],
        metavar="GLOB=N",
        dest="limits",
        help="at most N items of a matching group run at once, across the queue "
        "(repeatable, first match wins; '*=N' caps each group; 0 holds a group)",
    )
    p.add_argument(
        "--rate",
        type=from_input(rules.rate_rule),
        action="append",
        default=[],
        metavar="GLOB=N/PERIOD",
        dest="rates",
        help="at most N starts of a matching group in any PERIOD, e.g. 'acme=100/1m' "
        "(repeatable, first match wins)",
    )
    p.add_argument(
        "--fair",
        action="store_true",
        help="the next free slot goes to the group furthest below its (weighted) share of "
        "the running slots; priorities order items within a group",
    )
    p.add_argument(
        "--weight",
        type=from_input(rules.weight_rule),
        action="append",
        default=[],
        metavar="GLOB=W",
        dest="weights",
        help="with --fair: a matching group's share is W (default 1; repeatable)",
    )


def tenancy_options(args):
    from ..tenancy.rules import TenancyOptions

    if args.weights and not args.fair:
        raise UserError("--weight divides fair shares: give --fair with it")
    return TenancyOptions(group=args.group.pattern if args.group else None, limits=args.limits,
                          rates=args.rates, fair=args.fair, weights=args.weights)  # fmt: skip


def manager_options(args, **extra) -> ManagerOptions:
    from ..runtime.runner import ManagerOptions

    return ManagerOptions(
        parallelism=args.parallelism,
        max_parallelism=max(args.max_parallelism or 0, args.parallelism),
        max_attempts=args.max_attempts,
        retry_backoff=args.retry_backoff,
        grace=args.grace,
        autoscale=args.autoscale,
        min_parallelism=min(args.min_parallelism, args.parallelism),
        scale_interval=args.scale_interval,
        scale_down_delay=args.scale_down_delay,
        window=args.scale_window,
        on_change=args.on_change,
        cancel_removed=args.cancel_removed,
        removal_hold=None if args.accept_removals else args.removal_hold,
        mass_removal_fraction=args.mass_removal_fraction,
        mass_removal_min=args.mass_removal_min,
        priorities=args.priorities,
        tenancy=tenancy_options(args),
        **extra,
    )


def check_parallelism_bounds(args) -> None:
    if args.max_parallelism is not None and args.min_parallelism > args.max_parallelism:
        raise UserError("--min-parallelism is above --max-parallelism")


def stats_endpoint(args) -> StatsEndpoint | None:
    from ..assembly import StatsEndpoint

    if args.metrics_port is None:
        return None
    return StatsEndpoint(args.metrics_host, args.metrics_port, ui_token(args),
                         frozenset(args.allowed_host or ()))  # fmt: skip


def ui_token(args) -> str | None:
    """`WORKQUEUE_UI_TOKEN`, or the token in `--ui-token-file` (one or the other), checked; a
    token written on the command line is refused (`ps` shows it to everyone)."""
    given_here = args.ui_token is not None and "ui_token" not in getattr(
        args, "environment_sources", {}
    )
    if given_here:
        raise UserError(
            "--ui-token on the command line is visible to every user of this machine (ps): "
            "give it in WORKQUEUE_UI_TOKEN or a file (--ui-token-file)"
        )
    if args.ui_token_file is None:
        return args.ui_token
    if args.ui_token is not None:
        raise UserError("give WORKQUEUE_UI_TOKEN or --ui-token-file, not both")
    try:
        with open(args.ui_token_file, encoding="utf-8") as f:
            text = f.read().strip()
    except OSError as exc:
        raise UserError(
            f"cannot read --ui-token-file {args.ui_token_file}: {exc.strerror}"
        ) from None
    except UnicodeDecodeError:
        raise UserError(f"--ui-token-file {args.ui_token_file} is not text") from None
    try:
        return token(text)
    except argparse.ArgumentTypeError as exc:
        raise UserError(f"the token in {args.ui_token_file} {exc}") from None


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "manager",
        help="run one unit of work per item a source lists",
        description="Poll a source ambassador and run the worker once for every item.",
    )
    p.add_argument(
        "--source", required=True, help="the ambassador's URL, e.g. http://127.0.0.1:8080"
    )
    p.add_argument(
        "--backend",
        choices=backends.NAMES,
        default=backends.DEFAULT,
        help=f"where work runs (default {backends.DEFAULT})",
    )
    p.add_argument(
        "--once",
        action="store_true",
        help="process what the source lists now, wait for it, then exit",
    )
    p.add_argument(
        "--poll-interval",
        type=duration,
        default=10.0,
        help="time between polls, jittered by ±20%% (default 10s)",
    )
    p.add_argument(
        "--watch", action="store_true", help="follow the source's watch stream instead of polling"
    )
    p.add_argument(
        "--source-timeout",
        type=duration,
        default=30.0,
        help="with --once: how long an unreachable source is tried before the run gives up "
        "with exit 2 (default 30s; without --once the manager waits for it)",
    )
    add_run_options(p)
    seen: set[str] = set()
    for name in backends.NAMES:
        group = p.add_argument_group(f"{name} backend")
        add_declared(group, backends.load(name).Options, seen=seen)
    p.set_defaults(func=run_manager)


def install_signal_handlers(manager: Manager) -> dict:
    """SIGTERM, SIGINT and SIGHUP (a closed terminal) stop the manager (running work gets its
    grace period). Returns a dict that holds the signal's number under "signal" once one
    came."""
    got: dict[str, int] = {}

    def handler(signum, _frame):
        got["signal"] = signum
        log.info(
            "%s: stopping; running work gets %gs to finish",
            signal.Signals(signum).name,
            manager.options.grace,
        )
        manager.stop()

    if threading.current_thread() is threading.main_thread():
        for sig in STOP_SIGNALS:
            signal.signal(sig, handler)
    return got


def run_once(manager: Manager, ledger, got: dict) -> int:
    """A `--once` run with its progress bar and summary; the exit code."""
    from .once import print_summary, run_with_progress

    report = run_with_progress(manager)
    try:
        code = print_summary(report, ledger)
    except StorageFault:  # an I/O error may refuse even the summary's reads
        code = 1
    fault = manager.final_fault()
    if fault is not None:
        raise fault  # one line and exit 3 (`manager.cli.main`)
    if report.interrupted:
        return 128 + got.get("signal", signal.SIGINT)
    return code


def run_manager(args) -> int:
    from ..assembly import assemble
    from .typed_secrets import no_password_in_source

    no_password_in_source(args)
    check_parallelism_bounds(args)
    backend_options = from_words(backends.load(args.backend).Options, vars(args))
    options = manager_options(
        args,
        poll_interval=args.poll_interval,
        watch=args.watch,
        source_timeout=args.source_timeout if args.once else None,
    )
    built = assemble(
        args.source, args.backend, backend_options, options, stats=stats_endpoint(args)
    )
    try:
        manager = built.manager
        got = install_signal_handlers(manager)
        if not manager.lead():
            return 128 + got.get("signal", signal.SIGTERM)
        if args.once:
            code = run_once(manager, built.ledger, got)
        else:
            log.info(
                "manager: source %s, parallelism %d, state %s",
                args.source,
                args.parallelism,
                built.ledger.where,
            )
            manager.run_forever()
            code = 128 + got["signal"] if "signal" in got else 0
        if manager.lost_leadership:
            log.error("leader election: lost the lease; exiting so a new candidate can lead")
            return 1
        return code
    finally:
        built.close()
