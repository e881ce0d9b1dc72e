"""`workqueue run SOURCE -- CMD ARGS…`: one command for a folder (or any other source), on one
machine.

SOURCE is what `workqueue ambassador --source` takes (the forms the source registry's lines
give, `ambassador.sources.registry.BUILT_IN`): a folder, an S3 or Cloud Storage bucket, an
Azure Blob container, a Redis set or stream, a NATS JetStream stream, a Kafka topic.
It is read through the ambassador's own source, in-process (`manager.sources.folder`); files
still being copied are waited for, and the local manager runs with `--once` on it: every
matching item once, a progress bar on a terminal, a summary at the end. Exit 0 when every item
succeeded (or, with --cancel-removed, was cancelled because its file went), 1 when any failed.
Everything after `--` is the worker command, word for word.
"""

from __future__ import annotations

from kube_workqueue.ambassador.source_options import add_folder_options, source_spec, suffix_hint
from kube_workqueue.ambassador.sources.registry import forms, source_type

from ..backends.local import LocalOptions, worker_argv
from ..declared import from_words
from ..errors import UserError
from .argtypes import add_declared, duration_or_zero
from .manager_cmd import (
    add_run_options,
    check_parallelism_bounds,
    install_signal_handlers,
    manager_options,
    run_once,
    stats_endpoint,
)


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "run",
        help="one command: run CMD once for every matching item of a folder, bucket, set or log",
        description=f"Read SOURCE ({forms(third_party=False)}) through the ambassador's own "
        "source, in-process (no HTTP), and run a local manager with --once on it.",
    )
    p.add_argument("dir", metavar="SOURCE", help="a folder of items, or a source URL")
    add_folder_options(p, duration_or_zero)
    add_run_options(p)
    add_declared(p, LocalOptions, skip={"--worker-cmd"})
    p.set_defaults(func=run_folder, command=[])
    p.usage = "workqueue run SOURCE [--suffix .mp4]… [options] -- CMD ARGS…"


def run_folder(args) -> int:
    from ..assembly import assemble

    if not args.command:
        raise UserError("give the worker command after --, e.g. workqueue run DIR -- CMD ARGS")
    argv = worker_argv(args.command)
    from kube_workqueue.ambassador.sources.registry import typed_secret

    refused = typed_secret(args.dir)
    if refused:
        raise UserError(refused)
    spec = source_spec(args.dir, args, UserError)  # a bad source: one line, exit 2
    check_parallelism_bounds(args)
    local = from_words(LocalOptions, vars(args), worker_argv=argv)
    # --cancel-removed: the folder is listed every ~2 s for what left it (in-process: cheap)
    options = manager_options(args, poll_interval=2.0)
    ungrouped(options.tenancy, spec.kind)
    unplaced(local, options.tenancy, spec.kind)
    from kube_workqueue.ambassador.sources.listers import SourceUnreachable
    from kube_workqueue.ambassador.sources.registry import source_type

    from ..sources.folder import open_source

    where = source_type(spec.kind).shown(spec.config)
    objects_for_workers(args.dir)
    try:
        source = open_source(spec.config, where)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    except SourceUnreachable as exc:  # reached a moment ago by the check: say what it says now
        raise UserError(str(exc)) from None
    try:
        source.wait_settled()
        if not args.cancel_removed:  # the run's items are the ones there now: nothing to follow
            source.stop_following()
        hint = suffix_hint(spec.config) if not source.list_items() else None
        built = assemble(source, "local", local, options, stats=stats_endpoint(args))
        try:
            code = run_once(built.manager, built.ledger, install_signal_handlers(built.manager))
        finally:
            built.close()
        if hint:
            print(hint)
        return code
    finally:
        source.stop()


def objects_for_workers(url: str) -> None:
    """An object-store source's prefix in `WORKQUEUE_SOURCE_OBJECTS` (beside any already
    there), which every worker inherits: fetch-run-put reads the objects the queue lists
    without an `--input-url`, and nothing else a record or member may name."""
    import os

    from kube_workqueue.ambassador.sources.objects import listed_objects
    from kube_workqueue.workers.input_rules import SOURCE_OBJECTS

    listed = listed_objects(url)
    if listed:
        given = os.environ.get(SOURCE_OBJECTS, "").split()
        os.environ[SOURCE_OBJECTS] = " ".join(dict.fromkeys([*given, listed]))


def unplaced(local: LocalOptions, tenancy, kind: str) -> None:
    """A `UserError` for placement that could never apply to this source's items: a
    `group:` need rule without `--group` where items carry no group of their own, or
    `--needs-from-data` where an item's data cannot say a need (a file's, an object's: what
    the store lists of it)."""
    from ..placement import GROUP_PREFIX

    if source_type(kind).data_groups:
        return
    by_group = [glob for glob, _ in local.needs if glob.startswith(GROUP_PREFIX)]
    if by_group and not tenancy.group:
        raise UserError(
            f"--needs {by_group[0]}=…: a group: rule matches an item's group, and this "
            "source's items have none of their own: give --group REGEX, or match names"
        )
    if local.needs_from_data:
        raise UserError(
            "--needs-from-data reads a 'needs' field of an item's data, and this source's "
            "items (files, objects) have no such field: give --needs GLOB=NEED rules"
        )


def ungrouped(tenancy, kind: str) -> None:
    """A `UserError` for group rules without `--group` over a source whose items carry no
    group of their own (its type's `data_groups`: a folder's files, a bucket's objects):
    every rule would hold nothing."""
    if tenancy.group or source_type(kind).data_groups:
        return
    given = [flag for flag, value in (("--limit", tenancy.limits), ("--rate", tenancy.rates),
                                      ("--fair", tenancy.fair), ("--weight", tenancy.weights))
             if value]  # fmt: skip
    if given:
        raise UserError(
            f"{given[0]} applies to groups, and this source's items have none of their own: "
            "give --group REGEX, whose first capture on an item's name is its group "
            "(e.g. --group '^([^/]+)/' for the first folder)"
        )
