"""`workqueue ambassador`: serve the ambassador with gunicorn (never Flask's development server).

    workqueue ambassador --source URL [--suffix .mp4]… [--recursive] [--settle SECONDS]
                         [--host 127.0.0.1] [--port 8080] [--workers N] [--force-polling]

URL picks the source through the registry (sources/registry.py, whose `BUILT_IN` lines give
the forms `--help` lists: a folder path or file:///path - `--root DIR` is the same -, an S3
or Cloud Storage bucket, an Azure Blob container, a Redis set or stream, a NATS JetStream
stream, a Kafka topic). It is checked once
before anything is served, so a bucket that does not exist, missing credentials or an
unreachable server is one line and exit 2.

Gunicorn runs `--workers` processes of the gthread worker, so a long watch stream occupies one
thread, not a whole worker - and each worker may run up to `--threads` (1024) of them: threads
are made only as connections need them, an idle watch costs a thread's touched stack and a
queue (bench/ambassador.py measures it), and no monkey-patching is needed, as a gevent worker
would (the snapshot's follower threads and the file watcher stay plain threads). A listing or
an item GET holds a thread for milliseconds; keep-alive connections between requests hold
none. The folder is watched by one process, started first: the snapshot
publisher of `publication.py`; every worker serves the listing it publishes, so all of them answer
from one snapshot whose version only grows. With more than one worker, metrics
use prometheus-client's multiprocess mode through a private directory made here, before anything
imports prometheus-client, and removed at exit.

The default host is 127.0.0.1: in Burns' design the ambassador is a localhost sidecar of the
manager; pass --host 0.0.0.0 to serve a Service.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
import sys

from kube_workqueue.safelog.logs import logging_config

from .limits import (
    DEFAULT_HEAD_TIMEOUT,
    DEFAULT_MAX_HEAD,
    DEFAULT_MAX_LINE,
    ENV_HEAD_TIMEOUT,
    ENV_MAX_HEAD,
    ENV_MAX_LINE,
)
from .source_options import add_folder_options, seconds, source_spec, suffix_hint
from .sources.registry import forms

SOURCE_FORMS = forms(third_party=False)  # the registry's lines, as --help lists them
THREADS_PER_WORKER = 1024  # watch streams hold one each for their whole life


def add_parser(subparsers, user_error: type[Exception], duration=None) -> None:
    """The `ambassador` sub-command. `user_error` is the exception class whose message the
    caller prints as one line; `duration` parses time flags (>= 0) - the caller's one duration
    parser, or bare seconds."""
    duration = duration or seconds
    p = subparsers.add_parser(
        "ambassador",
        help="serve the items API for a folder, a bucket (S3, Cloud Storage, Azure Blob), a Redis "
        "set or stream, a NATS stream or a Kafka topic",
        description=f"Serve GET /api/v1/items for the items of --source ({SOURCE_FORMS}) that "
        "end with --suffix.",
    )
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument(
        "--source",
        metavar="URL",
        help=f"where the items are: {SOURCE_FORMS}",
    )
    where.add_argument("--root", metavar="DIR", help="a folder whose files are the items")
    add_folder_options(p, duration)
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=_port, default=8080, help="port (default 8080; 0 = any free)")
    p.add_argument("--workers", type=_workers, default=2, help="gunicorn worker processes (2)")
    p.add_argument(
        "--threads",
        type=_threads,
        default=THREADS_PER_WORKER,
        help=f"most requests a worker serves at once - each watch stream holds one "
        f"(default {THREADS_PER_WORKER}; made as needed)",
    )
    guard = p.add_argument_group(
        "staying up for lists whatever a client does",
        "A request's head is read without a thread, against a deadline and size limits; "
        "watches are capped so lists and item reads always find a thread. Refusals are "
        "counted in /metrics (ambassador_refused_total{reason}).",
    )
    guard.add_argument(
        "--head-timeout",
        type=duration,
        default=DEFAULT_HEAD_TIMEOUT,
        help="a request's head must arrive within this (408 after; default 10s)",
    )
    guard.add_argument(
        "--max-request-line",
        type=_bytes(256, 65536),
        default=DEFAULT_MAX_LINE,
        help=f"longest request line, refused with 414 as soon as it is passed "
        f"(default {DEFAULT_MAX_LINE})",
    )
    guard.add_argument(
        "--max-header-bytes",
        type=_bytes(1024, 1 << 20),
        default=DEFAULT_MAX_HEAD,
        help=f"largest request head, refused with 431 as soon as it is passed "
        f"(default {DEFAULT_MAX_HEAD})",
    )
    guard.add_argument(
        "--max-watches",
        type=_bytes(1, 1_000_000),
        help="watch streams served at once, in all (429 past it; default half of --threads "
        "x --workers: the rest are kept for lists and item reads)",
    )
    guard.add_argument(
        "--max-watches-per-client",
        type=_bytes(1, 1_000_000),
        help="watch streams one client address may hold at once (429 past it; default "
        "half of --max-watches)",
    )
    p.set_defaults(func=lambda args: serve(args, user_error))


def _port(text: str) -> int:
    if not text.isdigit() or not 0 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}")
    return int(text)


def _workers(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 64:
        raise argparse.ArgumentTypeError(f"must be a whole number from 1 to 64: {text!r}")
    return int(text)


def _bytes(low: int, high: int):
    def parse(text: str) -> int:
        if not text.isdigit() or not low <= int(text) <= high:
            raise argparse.ArgumentTypeError(f"must be a whole number from {low} to {high}: "
                                             f"{text!r}")  # fmt: skip
        return int(text)

    return parse


def guard_settings(args, user_error: type[Exception]) -> dict:
    """The per-worker limits the flags ask for (each of --workers takes its share), as the
    app's configuration and the guarded worker's environment; impossible ones refused."""
    threads = getattr(args, "threads", THREADS_PER_WORKER)
    workers = getattr(args, "workers", 1)
    total = getattr(args, "max_watches", None) or (threads * workers) // 2 or 1
    per_client = getattr(args, "max_watches_per_client", None) or max(1, total // 2)
    share = -(-total // workers)
    if share >= threads:
        raise user_error(
            f"--max-watches {total} leaves no thread for lists: at most "
            f"{threads * workers - workers} with --threads {threads} and --workers {workers}"
        )
    if per_client > total:
        raise user_error("--max-watches-per-client is above --max-watches")
    return {
        "MAX_WATCHES": share,
        "MAX_WATCHES_PER_CLIENT": -(-per_client // workers),
        "env": {
            ENV_HEAD_TIMEOUT: repr(getattr(args, "head_timeout", DEFAULT_HEAD_TIMEOUT)),
            ENV_MAX_LINE: str(getattr(args, "max_request_line", DEFAULT_MAX_LINE)),
            ENV_MAX_HEAD: str(getattr(args, "max_header_bytes", DEFAULT_MAX_HEAD)),
        },
    }


def _threads(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 10_000:
        raise argparse.ArgumentTypeError(f"must be a whole number from 1 to 10000: {text!r}")
    return int(text)


def app_config(args, user_error: type[Exception] = ValueError) -> dict:
    """The app configuration of `--source` (or `--root`) and the options, checked."""
    url = args.source if getattr(args, "source", None) else args.root
    if url is None:
        raise user_error("give --source URL (or --root DIR)")
    from .sources.registry import typed_secret

    refused = None
    if "source" not in (getattr(args, "environment_sources", None) or {}):
        refused = typed_secret(url, instead="WORKQUEUE_SOURCE")
    if refused:
        raise user_error(f"--source: {refused}")
    return source_spec(url, args, user_error).config


def serve(args, user_error: type[Exception]) -> int:
    config = app_config(args, user_error)
    guard = guard_settings(args, user_error)
    env = guard.pop("env")
    config.update(guard)
    os.environ.update(env)  # the guarded workers read their limits there (forks inherit it)
    _more_descriptors()
    listener = _listen(args.host, args.port, user_error)
    host, port = listener.getsockname()[:2]
    where = f"http://{_bind_host(host)}:{port}"
    print(f"workqueue ambassador: serving {_shown(config)} on {where}", flush=True)
    hint = suffix_hint(config)  # a folder of files that are none of its items: said at once
    if hint:
        print(hint, file=sys.stderr, flush=True)
    from .private_folders import METRICS_PREFIX, SNAPSHOT_PREFIX, make_held, remove_left_behind

    remove_left_behind()  # an ambassador killed with SIGKILL left its folders
    held = []  # the folders' locked descriptors: open for this process's life (and its forks')
    metrics_dir = None  # (even with one worker: its refusals are counted outside the app)
    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        metrics_dir, fd = make_held(METRICS_PREFIX)
        held.append(fd)
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir
    snapshot_dir, fd = make_held(SNAPSHOT_PREFIX)
    held.append(fd)
    publisher = _start_publisher(config, snapshot_dir, user_error)
    from .publication import large_blocks_go_back

    large_blocks_go_back()  # the workers are forks: they keep the setting
    _imported_before_forking()
    master = os.getpid()
    try:
        _run_gunicorn(
            {**config, "SHARED_SNAPSHOT": snapshot_dir},
            f"fd://{listener.fileno()}",
            args.workers,
            getattr(args, "threads", THREADS_PER_WORKER),
            getattr(args, "log_format", "text"),
            getattr(args, "log_level", None) or "warning",
        )
    except SystemExit as leaving:
        if os.getpid() != master:  # a worker, at its end (gunicorn's `sys.exit`)
            _worker_leaves(leaving.code)
        raise
    finally:
        # gunicorn's workers are forks of this process and leave through here too: only the
        # process that started the publisher and made the folders may end and remove them.
        if os.getpid() == master:
            publisher.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                publisher.wait(10)
            with contextlib.suppress(OSError):  # gunicorn closes the listeners it was given
                listener.close()
            shutil.rmtree(snapshot_dir, ignore_errors=True)
            if metrics_dir:
                shutil.rmtree(metrics_dir, ignore_errors=True)
            for fd in held:
                os.close(fd)
    return 0


def _imported_before_forking() -> None:
    """What every gunicorn worker would import first (Flask, the app, the worker class),
    imported once here, so that the workers - forks of this process - start with it.

    Without it each worker imported Flask and the app itself after the fork (`preload_app` is
    off: the app, its snapshot follower and its threads are made in each worker): measured
    0.78 s of CPU for an ambassador's start with two workers, 0.3 s of it per worker. Only
    modules are loaded here, never the app: nothing made here runs in a worker but code, and
    the forks share its pages. After the metrics folder is set: prometheus-client picks its
    multiprocess mode when it is first imported."""
    from . import app, guarded_worker  # noqa: F401


def _worker_leaves(code) -> None:
    """End a gunicorn worker as its exit would, without the interpreter's teardown: the exit
    handlers run (logging's flush) and the streams are flushed, then the process ends.

    A worker is a fork of the master: tearing the interpreter down touches every object it
    inherited (reference counts), so each page of the master's heap was copied into the worker
    only to be freed - measured 0.1 s of CPU a worker at each stop, more than its boot. Nothing
    of a worker's needs the teardown: its metrics are in files it maps, written as they
    change, and what its sockets and files hold is the kernel's to close."""
    import atexit
    import sys

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    if code is not None and not isinstance(code, int):  # as `sys.exit("why")` says it
        with contextlib.suppress(OSError, ValueError):
            print(code, file=sys.stderr, flush=True)
    os._exit(code if isinstance(code, int) else 0 if code is None else 1)


def _start_publisher(config: dict, folder: str, user_error: type[Exception]):
    """The one process that keeps the snapshot (`publication.py`), started before gunicorn and
    waited for until it has published its first listing. A process of its own (not a fork
    that gunicorn's workers would inherit as a child). Its configuration - a source URL may
    hold a password - goes through a pipe on its stdin, never its arguments (`ps` shows those
    to every user of the machine)."""
    import json
    import sys
    import time

    from .publication import CURRENT

    process = subprocess.Popen(
        [sys.executable, "-m", "kube_workqueue.ambassador.publication", folder],
        stdin=subprocess.PIPE,
    )  # fmt: skip
    with contextlib.suppress(BrokenPipeError):  # (one that died says why below)
        process.stdin.write(json.dumps(config).encode())
        process.stdin.close()
    while not os.path.exists(os.path.join(folder, CURRENT)):
        if process.poll() is not None:
            raise user_error(f"cannot read {_shown(config)} (the snapshot process ended)")
        time.sleep(0.02)
    return process


def _shown(config: dict) -> str:
    """The source as a person would name it (its type's `shown`)."""
    from .sources.registry import kind_of, source_type

    return source_type(kind_of(config)).shown(config)


def _listen(host: str, port: int, user_error: type[Exception]):
    """The listening socket, bound here so that a port in use or an address this machine does
    not have is one line - gunicorn would log and retry for five seconds - and so that port 0
    is known before serving. gunicorn's workers inherit it (`fd://`)."""
    import socket

    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        listener = socket.socket(family, kind, proto)
    except (OSError, UnicodeError) as exc:
        raise user_error(f"cannot listen on {host}:{port}: {exc}") from None
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(address)
        listener.listen(2048)
    except OSError as exc:
        listener.close()
        raise user_error(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    listener.set_inheritable(True)
    return listener


def _more_descriptors() -> None:
    """As many open files as the system allows this process (a socket each): thousands of
    clients whose heads are still coming are cheap now, and must not run out of descriptors
    before they run out of deadline."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = hard if hard != resource.RLIM_INFINITY else 65536
    if soft != resource.RLIM_INFINITY and soft < wanted:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


def _bind_host(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def _run_gunicorn(
    config: dict,
    bind: str,
    workers: int,
    threads: int = THREADS_PER_WORKER,
    log_format: str = "text",
    log_level: str = "warning",
) -> None:
    from gunicorn.app.base import BaseApplication

    class AmbassadorServer(BaseApplication):
        def load_config(self) -> None:
            for key, value in {
                "bind": bind,
                "workers": workers,
                "worker_class": "kube_workqueue.ambassador.guarded_worker.GuardedWorker",
                "threads": threads,
                # a connection whose head is still coming holds no thread: many may wait
                "worker_connections": max(threads + 256, 16_384),
                "timeout": 60,
                "graceful_timeout": 2,  # a listing takes milliseconds; a watch never ends
                "keepalive": 5,
                "limit_request_line": 0,  # long URIs get a Status 414 from the app instead
                "preload_app": False,
                "accesslog": None,
                "loglevel": log_level,
                "logconfig_dict": logging_config(log_format, log_level),
                "proc_name": "workqueue-ambassador",
            }.items():
                self.cfg.set(key, value)

        def load(self):
            from .app import create_app

            return create_app(config)

    AmbassadorServer().run()
