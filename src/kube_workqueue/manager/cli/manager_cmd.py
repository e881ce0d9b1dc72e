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
from .argtypes import add_declared, add_row, duration, token
from .interrupts import STOP_SIGNALS

if TYPE_CHECKING:  # the manager itself is imported when a command runs, not to parse flags:
    # building the parser must not import prometheus-client before `workqueue ambassador` has
    # set up its multiprocess directory (and `--help` stays fast)
    from ..assembly import StatsEndpoint
    from ..runtime.runner import Manager, ManagerOptions

log = logging.getLogger(__name__)


def add_run_options(p: argparse.ArgumentParser, *, manager: bool = False) -> None:
    """The options of running a manager, shared by `manager` and `run` (with `manager`: the
    manager command's own, too), each made from its row in `manager.runtime.run_options`;
    read them back with `manager_options(args)` and `stats_endpoint(args)`."""
    from ..runtime.run_options import REMOVALS, RUN_OPTIONS

    sections = {
        REMOVALS: p.add_argument_group(
            REMOVALS,
            "A listing that loses every item known, or more than --mass-removal-fraction of "
            "them and at least --mass-removal-min, is held: nothing is cancelled until it has "
            "lasted --removal-hold, or `workqueue resume --accept-removals` accepts it.",
        )
    }
    for row in RUN_OPTIONS:
        if row.manager_only and not manager:
            continue
        add_row(sections.get(row.section, p), row)


def manager_options(args, **extra) -> ManagerOptions:
    """The options the flags (or their variables) ask for, one field per row of
    `manager.runtime.run_options`; the bounds follow `--parallelism` (the autoscaler's room
    holds it), and `--accept-removals` holds nothing."""
    from ..runtime.run_options import RUN_OPTIONS, options_fields
    from ..runtime.runner import ManagerOptions
    from ..tenancy.rules import TenancyOptions

    if args.weights and not args.fair:
        raise UserError("--weight divides fair shares: give --fair with it")
    values = {row.name: getattr(args, row.name) for row in RUN_OPTIONS if hasattr(args, row.name)}
    fields, tenancy = options_fields(values)
    fields.update(
        max_parallelism=max(args.max_parallelism or 0, args.parallelism),
        min_parallelism=min(args.min_parallelism, args.parallelism),
        removal_hold=None if args.accept_removals else args.removal_hold,
        tenancy=TenancyOptions(**tenancy),
    )
    fields.update(extra)
    return ManagerOptions(**fields)


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
        "--source-timeout",
        type=duration,
        default=30.0,
        help="with --once: how long an unreachable source is tried before the run gives up "
        "with exit 2 (default 30s; without --once the manager waits for it)",
    )
    add_run_options(p, manager=True)
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
    options = manager_options(args, source_timeout=args.source_timeout if args.once else None)
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
