"""`workqueue status` and `workqueue retry`: read or change a queue's record, on any backend.

    workqueue status [--state-dir DIR] [--recent N]
    workqueue status --backend kubernetes --namespace NS --queue Q
    workqueue retry NAME [--state-dir DIR]
    workqueue retry NAME --backend kubernetes --namespace NS --queue Q

Both dispatch through the backend registry: each backend's `Queue` options name the queue, its
`status()` answers with a `QueueStatus`, its `retry()` with a line for people. An unknown item
is one line and exit 2 on every backend.
"""

from __future__ import annotations

import time

from .. import backends
from ..options import from_words
from ..ports import QueueStatus, State
from .argtypes import add_declared, positive_int


def _add_queue_options(p) -> None:
    p.add_argument(
        "--backend",
        choices=backends.NAMES,
        default=backends.DEFAULT,
        help=f"where the queue runs (default {backends.DEFAULT})",
    )
    seen: set[str] = set()
    for name in backends.NAMES:
        add_declared(p.add_argument_group(f"{name} backend"), backends.load(name).Queue, seen=seen)


def _queue(args):
    backend = backends.load(args.backend)
    return backend, from_words(backend.Queue, vars(args))


def add_parsers(subparsers) -> None:
    p = subparsers.add_parser("status", help="what a queue's record says")
    p.add_argument("--recent", type=positive_int, default=10, help="recent items to show")
    _add_queue_options(p)
    p.set_defaults(func=show_status)

    p = subparsers.add_parser("retry", help="run a failed item again")
    p.add_argument("name", help="the item's name")
    _add_queue_options(p)
    p.set_defaults(func=retry_item)


def show_status(args) -> int:
    backend, queue = _queue(args)
    print_status(backend.status(queue, args.recent))
    return 0


def print_status(status: QueueStatus, now: float | None = None) -> None:
    now = time.time() if now is None else now
    counts = status.counts
    total = sum(counts.values())
    print(
        f"{total} items in {status.where}: "
        + ", ".join(f"{counts.get(s.value, 0)} {s.value}" for s in State)
    )
    if status.recent:
        print("\nrecent:")
        for r in status.recent:
            took = (r.finished - r.started) if r.started and r.finished else 0.0
            print(f"  {r.state:9} {r.name}  ({took:.1f}s, attempt {r.attempts})")
    if status.failed:
        print("\nfailed:")
        for r in status.failed:
            print(
                f"  {r.name}: {r.last_error or 'failed'} after {r.attempts} attempt(s)"
                f"  log: {r.log_path}"
            )
    if status.running:
        print("\nrunning:")
        for r in status.running:
            since = f", for {now - r.started:.0f}s" if r.started else ""
            print(f"  {r.name} (attempt {r.attempts}{since})")


def retry_item(args) -> int:
    backend, queue = _queue(args)
    print(backend.retry(queue, args.name))
    return 0
