"""Assembling a manager from the command line: its ledger and backend (local, or Kubernetes),
its metrics and stats endpoint, leader election, and a `--once` run with its summary.
Shared by `workqueue manager` and `workqueue run`.
"""

from __future__ import annotations

import logging
import signal

log = logging.getLogger("workqueue.manager")


def build_manager(source_url: str, argv: list[str] | None, args, user_error):
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
        from .commands import _open_ledger

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
            manager.stats_server = StatsServer(
                manager, registry, args.metrics_host, args.metrics_port
            )
        except OSError as exc:
            closer()
            raise user_error(
                f"cannot serve metrics on port {args.metrics_port}: {exc.strerror}"
            ) from None
        log.info("metrics and stats on http://%s:%s", args.metrics_host, manager.stats_server.port)
    return manager, ledger, closer


def lead_or_stand_by(manager) -> bool:
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


def run_once(manager, ledger, got: dict | None = None) -> int:
    from .once import print_summary, run_with_progress

    if got is None:
        from .commands import _install_signal_handlers

        got = _install_signal_handlers(manager)
    report = run_with_progress(manager)
    code = print_summary(report, ledger)
    if report.interrupted:
        return 128 + got.get("signal", signal.SIGINT)
    return code
