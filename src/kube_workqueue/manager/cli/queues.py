"""Naming a queue on the command line, on any backend, and `--from-state`: its measured history.

    --backend local|kubernetes   and the chosen backend's own queue flags (--state-dir; or
                                 --namespace, --queue, --kubeconfig), declared in its package
    --from-state [DIR]           measure from the queue's record: a local state directory
                                 (DIR, or --state-dir), or the queue --backend kubernetes names

`status`, `retry`, `pause` and `resume` name their queue this way; `stability`, `simulate` and
`plan` read its record's rows through the registry (`BackendPackage.measured_record`), so a
user of either backend plans from their own measured times.
"""

from __future__ import annotations

from .. import backends
from ..declared import dest, flags, from_words
from ..errors import UserError
from ..items import QueueRecord
from .argtypes import add_declared


def add_queue_options(p) -> None:
    """`--backend` and every backend's queue flags (each flag once)."""
    p.add_argument(
        "--backend",
        choices=backends.NAMES,
        default=backends.DEFAULT,
        help=f"where the queue runs (default {backends.DEFAULT})",
    )
    seen: set[str] = set()
    for name in backends.NAMES:
        add_declared(p.add_argument_group(f"{name} backend"), backends.load(name).Queue, seen=seen)


def queue_of(args):
    """(the backend package, its typed `Queue`) the flags name. A shared ledger names the
    whole queue: a local state directory or a cluster's queue beside it would be ignored -
    a `UserError` instead (whether it came from the command line or the environment)."""
    words = vars(args)
    if words.get("declared_ledger"):
        sources = words.get("environment_sources") or {}
        said = sources.get("declared_ledger") or "--ledger"
        if words.get("declared_state_dir"):
            where = sources.get("declared_state_dir") or "--state-dir"
            raise UserError(f"{said} names a shared ledger and {where} a local queue: give one")
        if args.backend != backends.DEFAULT:
            raise UserError(f"{said} names the whole queue, whichever backend runs it: drop "
                            f"--backend {args.backend}")  # fmt: skip
    backend = backends.load(args.backend)
    return backend, from_words(backend.Queue, vars(args))


BY_QUEUE_FLAGS = object()  # `--from-state` without DIR: the queue its own flags name


def add_from_state(p, what: str) -> None:
    """`--from-state [DIR]` and the queue flags it reads with (`what` says what it does)."""
    p.add_argument(
        "--from-state",
        nargs="?",
        const=BY_QUEUE_FLAGS,
        metavar="DIR",
        help=f"{what}, from a queue's record: a local state directory (DIR, else --state-dir), "
        "or with --backend kubernetes the queue --namespace and --queue name",
    )
    add_queue_options(p)


def measured_record(args) -> QueueRecord | None:
    """The record `--from-state` names (None without the flag); one with no items yet, or a
    DIR given to a backend that has none, is a `UserError`."""
    if args.from_state is None:
        return None
    words = dict(vars(args))
    backend = backends.load(args.backend)
    if args.from_state == "":
        raise UserError("--from-state is empty: give a state directory, or no value")
    if args.from_state is not BY_QUEUE_FLAGS:  # DIR: the backend's own state directory
        field = next((f for f in flags(backend.Queue) if f.name == "state_dir"), None)
        if field is None:
            raise UserError(
                f"--from-state {args.from_state}: --backend {args.backend} keeps no state "
                "directory; name the queue with its own flags"
            )
        words[dest(field)] = args.from_state
    record = backend.measured_record(from_words(backend.Queue, words))
    if not record.rows:
        raise UserError(f"the record of {record.where} has no items yet")
    return record
