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
from .assemble import build_manager, lead_or_stand_by, run_once
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
        help="serve /metrics, /stats and /healthz on this port (0 = any free)",
    )
    p.add_argument(
        "--metrics-host",
        default="127.0.0.1",
        help="the address --metrics-port binds (default 127.0.0.1; 0.0.0.0 in a pod)",
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
    from ambassador.server import add_folder_options

    add_folder_options(p)
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
    p.add_argument("--backend", choices=["local", "kubernetes"], default="local")
    p.add_argument("--namespace", help="with --backend kubernetes")
    p.add_argument("--queue", help="with --backend kubernetes")
    p.add_argument("--kubeconfig", help="with --backend kubernetes")
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


# -- commands ------------------------------------------------------------------------------


def cmd_manager(args, user_error) -> int:
    argv = None
    if args.backend == "local":
        if not args.worker_cmd:
            raise user_error("--worker-cmd is required with --backend local")
        argv = _worker_argv(shlex.split(args.worker_cmd), user_error)
    _setup_logging()
    from .source_client import SourceProtocolError

    manager, ledger, closer = build_manager(args.source, argv, args, user_error)
    try:
        got = _install_signal_handlers(manager)
        if not lead_or_stand_by(manager):
            return 128 + got.get("signal", signal.SIGTERM)
        if args.once:
            code = run_once(manager, ledger, got)
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
    from ambassador.server import folder_config

    from .inprocess import serve_folder

    folder = folder_config(args)
    try:
        server = serve_folder(
            args.dir, folder["SUFFIXES"], recursive=folder["RECURSIVE"], settle=folder["SETTLE"]
        )
    except ValueError as exc:
        raise user_error(str(exc)) from None
    try:
        server.wait_settled()
        manager, ledger, closer = build_manager(server.url, argv, args, user_error)
        try:
            return run_once(manager, ledger)
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
    if args.backend == "kubernetes":
        from .kube_command import retry_item

        return retry_item(args, user_error)
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
