"""A source's command-line options and its resolution through the registry, shared by
`workqueue ambassador` (server.py) and `workqueue run` (manager/cli/run_cmd.py) - so the run
reaches its source through the registry without importing the ambassador's launcher.

    add_folder_options(p)      --suffix, --recursive, --settle, ... on a parser
    folder_config(args)        those options as given, for `registry.resolve`
    source_spec(url, args, E)  the registry's source for `url`, checked once: every problem
                               is one line (`E`), a missing library names its extra
"""

from __future__ import annotations

import argparse


def add_folder_options(p: argparse.ArgumentParser, duration=None) -> None:
    """Which items of a source are served and how it is read: `--suffix`, `--recursive`,
    `--settle`, `--version-by`, `--force-polling` (folders), `--poll-interval`,
    `--relist-interval`, `--endpoint-url`, `--sqs-queue-url` (S3). Shared by `workqueue
    ambassador` and `workqueue run`; read them back with `folder_config(args)`. `duration`
    parses the times (>= 0; default: bare seconds). The folder-only options default to None,
    so that giving one for another source is an error, not silently ignored."""
    duration = duration or seconds
    p.add_argument(
        "--suffix",
        action="append",
        dest="suffixes",
        metavar="SUFFIX",
        help="item file suffix, repeatable, case-insensitive (default .mp4)",
    )
    p.add_argument(
        "--recursive",
        action="store_true",
        default=None,
        help="also take files in subfolders (S3: keys below the prefix's sub-prefixes)",
    )
    p.add_argument(
        "--version-by",
        choices=("stat", "content"),
        default=None,
        help="folders: an item's version, a digest of size and mtime (stat, the default) or "
        "of the bytes (content, for sources where mtimes lie)",
    )
    p.add_argument(
        "--settle",
        type=duration,
        default=None,
        help="folders: how long a file's size and mtime must hold still (default 2s; 0 = at once)",
    )
    p.add_argument(
        "--force-polling",
        action="store_true",
        default=None,
        help="folders: poll instead of file events (network file systems such as NFS)",
    )
    p.add_argument(
        "--poll-interval",
        type=duration,
        default=None,
        help="time between listings when polling (folders 1s, S3 10s, Redis 2s)",
    )
    p.add_argument(
        "--relist-interval",
        type=duration,
        default=None,
        help="S3 with --sqs-queue-url, Redis with notifications: time between full listings, "
        "the safety net for a lost notification (default 5m)",
    )
    p.add_argument(
        "--endpoint-url",
        metavar="URL",
        help="S3: the store's endpoint (MinIO, Ceph, R2); default: AWS_ENDPOINT_URL_S3, "
        "AWS_ENDPOINT_URL, or AWS",
    )
    p.add_argument(
        "--sqs-queue-url",
        metavar="URL",
        help="S3: an SQS queue receiving the bucket's event notifications - changes cost "
        "O(changes), not a listing of the bucket",
    )


def folder_config(args) -> dict:
    """The common options as given (None: not given; see `add_folder_options`)."""
    return {
        "SUFFIXES": args.suffixes,
        "RECURSIVE": args.recursive,
        "SETTLE": args.settle,
        "VERSION_BY": args.version_by,
        "FORCE_POLLING": args.force_polling,
        "POLL_INTERVAL": args.poll_interval,
        "RELIST_INTERVAL": args.relist_interval,
        "S3_ENDPOINT_URL": args.endpoint_url,
        "SQS_QUEUE_URL": args.sqs_queue_url,
    }


def source_spec(url: str, args, user_error: type[Exception], *, check: bool = True):
    """The registry's source for `url` with the options of `args`, checked by reaching it
    once (`check`): every problem is `user_error` with one line."""
    from .sources.registry import SourceConfigError, resolve, source_type

    try:
        spec = resolve(url, folder_config(args))
        if check:
            source_type(spec.kind).check(spec.config)
    except SourceConfigError as exc:
        raise user_error(str(exc)) from None
    except ImportError as exc:
        needs = f"this source needs {exc.name}"
        raise user_error(f"{needs}: pip install 'kube-workqueue[{_extra_of(url)}]'") from None
    return spec


def _extra_of(url: str) -> str:
    """The extra that installs what the source type of `url` needs ("all" when unknown)."""
    from .sources.registry import SourceConfigError, scheme_of, source_type

    try:
        return source_type(scheme_of(url)).extra or "all"
    except (SourceConfigError, ImportError, AttributeError):
        return "all"


def seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0: {text!r}")
    return value
