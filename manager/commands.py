"""The manager's sub-commands: `manager`, `run`, `status`, `retry`.

    workqueue manager --source URL --backend local --worker-cmd "CMD ARGS" [--parallelism N]
                      [--state-dir DIR] [--timeout S] [--max-attempts N] [--once] [--watch] …
    workqueue run DIR --suffix .mp4 [--parallelism N] -- CMD ARGS…
    workqueue status [--state-dir DIR]
    workqueue retry NAME [--state-dir DIR]

User mistakes (a missing command, a bad URL, a busy state directory) are one line and exit 2.
A `--once` run exits 0 when every item succeeded, 1 when any failed (each named, with the tail of
its log), 130/143 when interrupted.
"""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import shutil
import signal
import sys
import threading
import time

from .argtypes import duration, positive_int, positive_seconds
from .ledger import Ledger, LedgerBusy, State

DEFAULT_STATE_DIR = ".workqueue"
log = logging.getLogger("workqueue.manager")


# -- argument types ------------------------------------------------------------------------


def _add_run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--parallelism", type=positive_int, default=2, help="units of work at once (default 2)"
    )
    p.add_argument(
        "--state-dir",
        default=DEFAULT_STATE_DIR,
        help=f"ledger and logs (default {DEFAULT_STATE_DIR})",
    )
    p.add_argument("--timeout", type=positive_seconds, help="kill a worker after this many seconds")
    p.add_argument(
        "--max-attempts",
        type=positive_int,
        default=3,
        help="tries per item before it stays failed (default 3)",
    )
    p.add_argument(
        "--retry-backoff",
        type=positive_seconds,
        default=1.0,
        help="first retry delay in seconds, doubling per failure (default 1)",
    )
    p.add_argument(
        "--grace",
        type=positive_seconds,
        default=10.0,
        help="seconds running work gets to finish on SIGTERM/SIGINT (default 10)",
    )
    p.add_argument(
        "--autoscale",
        action="store_true",
        help="move parallelism to the stability recommendation as times are measured",
    )
    p.add_argument(
        "--min-parallelism", type=positive_int, default=1, help="autoscale floor (default 1)"
    )
    p.add_argument(
        "--max-parallelism", type=positive_int, help="autoscale ceiling (default: --parallelism)"
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
        "--metrics-port",
        type=int,
        help="serve /metrics and /stats on this port (127.0.0.1; 0 = any free)",
    )


def add_parsers(subparsers, user_error: type[Exception]) -> None:
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
        choices=["local", "kubernetes"],
        default="local",
        help="where work runs (default local)",
    )
    p.add_argument("--worker-cmd", help='the worker command, e.g. "thumbnail --size 320"')
    p.add_argument(
        "--once",
        action="store_true",
        help="process what the source lists now, wait for it, then exit",
    )
    p.add_argument(
        "--poll-interval",
        type=positive_seconds,
        default=10.0,
        help="seconds between polls, jittered by ±20%% (default 10)",
    )
    p.add_argument(
        "--watch", action="store_true", help="follow the source's watch stream instead of polling"
    )
    _add_run_options(p)
    from .kube_command import add_options as add_kubernetes_options

    add_kubernetes_options(p)
    p.set_defaults(func=lambda a: cmd_manager(a, user_error))

    p = subparsers.add_parser(
        "run",
        help="one command: serve DIR and run CMD once for every matching file",
        description="Start an ambassador on DIR in-process and a local manager with --once.",
    )
    p.add_argument("dir", help="folder of items")
    p.add_argument(
        "--suffix",
        action="append",
        dest="suffixes",
        metavar="SUFFIX",
        help="item suffix, repeatable (default .mp4)",
    )
    p.add_argument("--recursive", action="store_true", help="include subfolders")
    p.add_argument(
        "--settle",
        type=float,
        default=2.0,
        help="seconds a fresh file must hold still before it counts (default 2)",
    )
    _add_run_options(p)
    p.set_defaults(func=lambda a: cmd_run(a, user_error), command=[])
    p.usage = "workqueue run DIR [--suffix .mp4]… [options] -- CMD ARGS…"

    p = subparsers.add_parser("status", help="what the local ledger says")
    p.add_argument("--state-dir", default=DEFAULT_STATE_DIR)
    p.add_argument("--recent", type=positive_int, default=10, help="recent items to show")
    p.set_defaults(func=lambda a: cmd_status(a, user_error))

    p = subparsers.add_parser("retry", help="run a failed item again")
    p.add_argument("name", help="the item's name")
    p.add_argument("--state-dir", default=DEFAULT_STATE_DIR)
    p.set_defaults(func=lambda a: cmd_retry(a, user_error))


# -- shared plumbing -----------------------------------------------------------------------


def _setup_logging() -> None:
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(message)s"
    )
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no line per in-process request


def _worker_argv(words: list[str], user_error) -> list[str]:
    if not words:
        raise user_error("no worker command given")
    exe = words[0]
    if os.sep in exe:
        if not (os.path.isfile(exe) and os.access(exe, os.X_OK)):
            raise user_error(f"worker command is not an executable file: {exe}")
    elif shutil.which(exe) is None:
        raise user_error(f"worker command not found on PATH: {exe}")
    return words


def require_ledger(state_dir: str, user_error) -> None:
    """For commands that read what a manager left: a clear error when nothing is there."""
    if not os.path.exists(os.path.join(state_dir, "ledger.sqlite3")):
        raise user_error(f"no ledger in {state_dir} (has a manager run there?)")


def _open_ledger(state_dir: str, user_error, *, exclusive: bool = True) -> Ledger:
    try:
        return Ledger(state_dir).open(exclusive=exclusive)
    except LedgerBusy as exc:
        raise user_error(str(exc)) from None
    except OSError as exc:
        raise user_error(f"cannot use state directory {state_dir}: {exc.strerror}") from None


def _install_signal_handlers(manager) -> dict:
    got: dict[str, int] = {}

    def handler(signum, _frame):
        got["signal"] = signum
        log.warning(
            "%s: stopping; running work gets %gs to finish",
            signal.Signals(signum).name,
            manager.options.grace,
        )
        manager.stop()

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)
    return got


def _build_manager(source_url: str, argv: list[str] | None, args, user_error):
    """The manager with its ledger and backend: local (argv is the worker command) or, with
    --backend kubernetes, the cluster's (argv is None). Returns (manager, ledger, closer)."""
    from prometheus_client import CollectorRegistry

    from .runner import Manager, ManagerOptions
    from .source_client import SourceClient, SourceProtocolError

    if args.max_parallelism is not None and args.min_parallelism > args.max_parallelism:
        raise user_error("--min-parallelism is above --max-parallelism")
    try:
        client = SourceClient(source_url)
    except SourceProtocolError as exc:
        raise user_error(str(exc)) from None
    registry = CollectorRegistry()
    elector = None
    if getattr(args, "backend", "local") == "kubernetes":
        from .kube_command import KubeParts

        parts = KubeParts(args, user_error, registry)
        ledger, backend, closer, elector = parts.ledger, parts.backend, parts.close, parts.elector
    else:
        from .backends.local import LocalBackend, end_process_group

        ledger = _open_ledger(args.state_dir, user_error)
        recovered = ledger.recover(end_process_group)
        if recovered:
            log.warning(
                "%d item(s) were running when the last manager stopped; they run again",
                len(recovered),
            )
        backend = LocalBackend(argv, ledger.state_dir, timeout=args.timeout)
        closer = ledger.close
    options = ManagerOptions(
        parallelism=args.parallelism,
        max_parallelism=max(args.max_parallelism or 0, args.parallelism),
        max_attempts=args.max_attempts,
        poll_interval=getattr(args, "poll_interval", 10.0),
        watch=getattr(args, "watch", False),
        retry_backoff=args.retry_backoff,
        grace=args.grace,
        autoscale=args.autoscale,
        min_parallelism=min(args.min_parallelism, args.parallelism),
        scale_interval=args.scale_interval,
        scale_down_delay=args.scale_down_delay,
        window=args.scale_window,
    )
    manager = Manager(client, ledger, backend, options, registry=registry)
    manager.elector = elector
    if args.metrics_port is not None:
        from .stats_server import StatsServer

        try:
            manager.stats_server = StatsServer(manager, registry, "127.0.0.1", args.metrics_port)
        except OSError as exc:
            closer()
            raise user_error(
                f"cannot serve metrics on port {args.metrics_port}: {exc.strerror}"
            ) from None
        log.info("metrics and stats on http://127.0.0.1:%s", manager.stats_server.port)
    return manager, ledger, closer


def _lead_or_stand_by(manager) -> bool:
    """With --leader-elect: wait for the Lease; if it is lost later, stop (the process exits 1
    and its supervisor restarts it as a candidate, as client-go's controllers do). False when
    the manager was stopped before it ever led."""
    elector = getattr(manager, "elector", None)
    if elector is None:
        return True
    lost = {"flag": False}

    def stopped_leading():
        lost["flag"] = True
        manager.stop()

    elector.on_stopped_leading = stopped_leading
    elector.start()
    log.info("leader election: standing by for %s", elector.lease_name)
    while not elector.leading.wait(0.5):
        if manager.stop_event.is_set():
            return False
    manager.lost_leadership = lost
    return True


def _run_once(manager, ledger, got: dict | None = None) -> int:
    from .once import run_with_progress

    if got is None:
        got = _install_signal_handlers(manager)
    report = run_with_progress(manager)
    from .summary import print_summary

    code = print_summary(report, ledger)
    if report.interrupted:
        return 128 + got.get("signal", signal.SIGINT)
    return code


# -- commands ------------------------------------------------------------------------------


def cmd_manager(args, user_error) -> int:
    argv = None
    if args.backend == "local":
        if not args.worker_cmd:
            raise user_error("--worker-cmd is required with --backend local")
        argv = _worker_argv(shlex.split(args.worker_cmd), user_error)
    _setup_logging()
    from .source_client import SourceProtocolError

    manager, ledger, closer = _build_manager(args.source, argv, args, user_error)
    try:
        got = _install_signal_handlers(manager)
        if not _lead_or_stand_by(manager):
            return 128 + got.get("signal", signal.SIGTERM)
        if args.once:
            code = _run_once(manager, ledger, got)
        else:
            where = ledger.state_dir or f"namespace {args.namespace}, queue {args.queue}"
            log.info(
                "manager: source %s, parallelism %d, state %s", args.source, args.parallelism, where
            )
            manager.run_forever()
            code = 128 + got["signal"] if "signal" in got else 0
        if getattr(manager, "lost_leadership", {}).get("flag"):
            log.error("leader election: lost the lease; exiting so a new candidate can lead")
            return 1
        return code
    except SourceProtocolError as exc:
        raise user_error(str(exc)) from None
    finally:
        closer()


def cmd_run(args, user_error) -> int:
    if not args.command:
        raise user_error("give the worker command after --, e.g. workqueue run DIR -- CMD ARGS")
    argv = _worker_argv(args.command, user_error)
    if not os.path.isdir(args.dir):
        raise user_error(f"not a folder: {args.dir}")
    _setup_logging()
    from .inprocess import serve_folder

    try:
        server = serve_folder(
            args.dir, args.suffixes or [".mp4"], recursive=args.recursive, settle=args.settle
        )
    except ValueError as exc:
        raise user_error(str(exc)) from None
    try:
        server.wait_settled()
        manager, ledger, closer = _build_manager(server.url, argv, args, user_error)
        try:
            return _run_once(manager, ledger)
        finally:
            closer()
    finally:
        server.stop()


def cmd_status(args, user_error) -> int:
    require_ledger(args.state_dir, user_error)
    ledger = _open_ledger(args.state_dir, user_error, exclusive=False)
    try:
        counts = ledger.counts()
        total = sum(counts.values())
        print(
            f"{total} items in {ledger.state_dir}: "
            + ", ".join(f"{counts[s.value]} {s.value}" for s in State)
        )
        recent = ledger.rows("finished IS NOT NULL", order="finished DESC", limit=args.recent)
        if recent:
            print("\nrecent:")
            for r in recent:
                took = (r.finished - r.started) if r.started and r.finished else 0.0
                print(f"  {r.state:9} {r.name}  ({took:.1f}s, attempt {r.attempts})")
        failed = ledger.rows("state='failed'", order="finished DESC")
        if failed:
            print("\nfailed:")
            for r in failed:
                print(
                    f"  {r.name}: {r.last_error or 'failed'} after {r.attempts} attempt(s)"
                    f"  log: {r.log_path}"
                )
        running = ledger.rows("state='running'")
        if running:
            print("\nrunning:")
            for r in running:
                print(f"  {r.name} (attempt {r.attempts}, for {time.time() - r.started:.0f}s)")
    finally:
        ledger.close()
    return 0


def cmd_retry(args, user_error) -> int:
    require_ledger(args.state_dir, user_error)
    try:
        ledger = Ledger(args.state_dir).open(exclusive=True)
        busy = False
    except LedgerBusy:
        ledger = _open_ledger(args.state_dir, user_error, exclusive=False)
        busy = True
    try:
        current = ledger.state(args.name)
        if current is None:
            raise user_error(f"no item named {args.name!r} in {ledger.state_dir}")
        if current[0] != State.FAILED.value:
            raise user_error(f"{args.name!r} is {current[0]}, not failed: nothing to retry")
        if busy:
            ledger.request_retry(args.name)
            print(f"{args.name}: the running manager will run it again")
        else:
            ledger.retry(args.name)
            print(f"{args.name}: pending again; the next manager run will run it")
    finally:
        ledger.close()
    return 0
