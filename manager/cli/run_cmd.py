"""`workqueue run DIR -- CMD ARGS…`: one command for a folder, on one machine.

It reads DIR through the ambassador's own file-system source, in-process (`manager.sources.folder`),
waits for files still being copied to settle, and runs the local manager with `--once` on it:
every matching file once, a progress bar on a terminal, a summary at the end. Exit 0 when
every item succeeded (or, with --cancel-removed, was cancelled because its file went), 1 when
any failed. Everything after `--` is the worker command, word for word.
"""

from __future__ import annotations

import os

from ambassador.server import add_folder_options, folder_config

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
        help="one command: run CMD once for every matching file of DIR",
        description="Read DIR through the ambassador's own folder source, in-process (no "
        "HTTP), and run a local manager with --once on it.",
    )
    p.add_argument("dir", help="folder of items")
    add_folder_options(p, duration_or_zero)
    add_run_options(p)
    add_declared(p, LocalOptions, skip={"--worker-cmd"})
    p.set_defaults(func=run_folder, command=[])
    p.usage = "workqueue run DIR [--suffix .mp4]… [options] -- CMD ARGS…"


def run_folder(args) -> int:
    from ..assembly import assemble

    if not args.command:
        raise UserError("give the worker command after --, e.g. workqueue run DIR -- CMD ARGS")
    argv = worker_argv(args.command)
    if not os.path.isdir(args.dir):
        raise UserError(f"not a folder: {args.dir}")
    if not os.access(args.dir, os.R_OK | os.X_OK):
        raise UserError(f"cannot read the folder {args.dir} (permission denied)")
    check_parallelism_bounds(args)
    local = from_words(LocalOptions, vars(args), worker_argv=argv)
    # --cancel-removed: the folder is listed every ~2 s for what left it (in-process: cheap)
    options = manager_options(args, poll_interval=2.0)
    from ..sources.folder import open_folder

    folder = folder_config(args)
    try:
        source = open_folder(
            args.dir,
            folder["SUFFIXES"],
            recursive=folder["RECURSIVE"],
            settle=folder["SETTLE"],
            version_by=folder["VERSION_BY"],
        )
    except ValueError as exc:
        raise UserError(str(exc)) from None
    try:
        source.wait_settled()
        built = assemble(source, "local", local, options, stats=stats_endpoint(args))
        try:
            return run_once(built.manager, built.ledger, install_signal_handlers(built.manager))
        finally:
            built.close()
    finally:
        source.stop()
