"""A source's command-line options and its resolution through the registry, shared by
`workqueue ambassador` (server.py) and `workqueue run` (manager/cli/run_cmd.py) - so the run
reaches its source through the registry without importing the ambassador's launcher.

    SOURCE_OPTIONS             each option declared once: flag, key, help, WorkQueue field
    add_folder_options(p)      --suffix, --recursive, --settle, ... on a parser
    folder_config(args)        those options as given, for `registry.resolve`
    from_spec(source)          a WorkQueue's spec.source as the ambassador's args and env
    source_spec(url, args, E)  the registry's source for `url`, checked once: every problem
                               is one line (`E`), a missing library names its extra
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass


@dataclass(frozen=True)
class SourceOption:
    """How a source is read, declared once: `flag` (None: the environment's alone), the
    configuration `key` `registry.resolve` takes, its help, how a word is typed (`timed`: a
    duration, parsed by the command's own parser; `choices`; `switch`; `repeat`), and `crd`,
    the WorkQueue's `spec.source` field the operator passes on (`manager.operator.queue_spec`)
    - as the flag, or as the ambassador's `environment` variable."""

    flag: str | None
    key: str
    help: str = ""
    dest: str | None = None
    metavar: str | None = None
    timed: bool = False
    switch: bool = False
    repeat: bool = False
    choices: tuple[str, ...] | None = None
    crd: str | None = None
    environment: str | None = None


SOURCE_OPTIONS: tuple[SourceOption, ...] = (
    SourceOption("--suffix", "SUFFIXES", "item file suffix, repeatable, case-insensitive "
                 "(default .mp4)", dest="suffixes", metavar="SUFFIX", repeat=True,
                 crd="suffixes"),
    SourceOption("--recursive", "RECURSIVE", "also take files in subfolders (object stores: "
                 "keys below the prefix's sub-prefixes)", switch=True, crd="recursive"),
    SourceOption("--version-by", "VERSION_BY", "folders: an item's version, a digest of size "
                 "and mtime (stat, the default) or of the bytes (content, for sources where "
                 "mtimes lie)", choices=("stat", "content")),
    SourceOption("--settle", "SETTLE", "folders: how long a file's size and mtime must hold "
                 "still (default 2s; 0 = at once)", timed=True, crd="settleSeconds"),
    SourceOption("--force-polling", "FORCE_POLLING", "folders: poll instead of file events "
                 "(network file systems such as NFS)", switch=True),
    SourceOption("--poll-interval", "POLL_INTERVAL", "time between listings when polling "
                 "(folders 1s, S3, Cloud Storage and Azure 10s, Redis 2s)", timed=True),
    SourceOption("--relist-interval", "RELIST_INTERVAL", "S3 with --sqs-queue-url, Redis with "
                 "notifications: time between full listings, the safety net for a lost "
                 "notification (default 5m)", timed=True),
    SourceOption("--endpoint-url", "S3_ENDPOINT_URL", "S3: the store's endpoint (MinIO, Ceph, "
                 "R2); default: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, or AWS", metavar="URL",
                 crd="endpointUrl"),
    SourceOption("--sqs-queue-url", "SQS_QUEUE_URL", "S3: an SQS queue receiving the bucket's "
                 "event notifications - changes cost O(changes), not a listing of the bucket",
                 metavar="URL"),
    # the bucket's region: boto3 reads it from the environment (no flag)
    SourceOption(None, "AWS_REGION", crd="region", environment="AWS_REGION"),
)  # fmt: skip


def _dest(option: SourceOption) -> str:
    assert option.flag is not None
    return option.dest or option.flag.lstrip("-").replace("-", "_")


def add_folder_options(p: argparse.ArgumentParser, duration=None) -> None:
    """Which items of a source are served and how it is read (`SOURCE_OPTIONS`: `--suffix`,
    `--recursive`, `--settle`, `--version-by`, `--force-polling` for folders, `--poll-interval`,
    `--relist-interval`, `--endpoint-url`, `--sqs-queue-url` for S3). Shared by `workqueue
    ambassador` and `workqueue run`; read them back with `folder_config(args)`. `duration`
    parses the times (>= 0; default: bare seconds). Every option defaults to None, so that
    giving one for another source is an error, not silently ignored."""
    duration = duration or seconds
    for option in SOURCE_OPTIONS:
        if option.flag is None:
            continue
        kwargs: dict = {"dest": _dest(option), "default": None, "help": option.help}
        if option.switch:
            kwargs["action"] = "store_true"
        elif option.repeat:
            kwargs["action"] = "append"
        if option.timed:
            kwargs["type"] = duration
        if option.choices:
            kwargs["choices"] = option.choices
        if option.metavar:
            kwargs["metavar"] = option.metavar
        p.add_argument(option.flag, **kwargs)


def folder_config(args) -> dict:
    """The options as given (None: not given; see `add_folder_options`)."""
    return {o.key: getattr(args, _dest(o)) for o in SOURCE_OPTIONS if o.flag is not None}


def from_spec(source: dict, *, folder: bool) -> tuple[list[str], dict[str, str], dict]:
    """A WorkQueue's `spec.source` as the ambassador's arguments, its environment and the
    configuration `registry.resolve` checks: each `SOURCE_OPTIONS` row with a `crd` field
    that is set. Without `folder`, the folder-only options (`registry.FOLDER_ONLY`, but for
    `recursive`, which an S3 prefix takes too) are left out: a bucket has no settling."""
    from .sources.registry import FOLDER_ONLY

    args: list[str] = []
    environment: dict[str, str] = {}
    config: dict = {}
    for option in SOURCE_OPTIONS:
        value = source.get(option.crd) if option.crd else None
        if value is None or value is False or value == []:
            continue
        if not folder and option.key in FOLDER_ONLY and option.key != "RECURSIVE":
            continue
        if option.flag is None:
            environment[option.environment or option.key] = str(value)
            continue
        config[option.key] = value
        if option.switch:
            args.append(option.flag)
        elif option.repeat:
            args += [f"{option.flag}={word}" for word in value]
        else:
            args.append(f"{option.flag}={value}")
    return args, environment, config


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
        needs = f"this source needs {(exc.name or 'its client').split('.')[0]}"
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


def suffix_hint(config: dict, most: int = 10_000) -> str | None:
    """Why a folder gives no items when it holds files: none ends with a suffix asked for
    (`.mp4` by default) - said with the suffix most of them have; None otherwise (not a
    folder, an empty one, one with a file that ends with a suffix asked for). At most `most`
    files are looked at. `workqueue run` says it after a run of nothing, the ambassador when
    it starts serving."""
    import collections
    import os

    root, suffixes = config.get("ROOT"), config.get("SUFFIXES") or []
    if not root or not suffixes or not os.path.isdir(root):
        return None
    endings = tuple(suffixes)
    found: collections.Counter[str] = collections.Counter()
    seen = 0
    for _, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".")] if config.get("RECURSIVE") else []
        for name in files:
            if not name.startswith("."):
                if name.lower().endswith(endings):
                    return None  # an item (or one settling): nothing to hint at
                found[os.path.splitext(name)[1] or "(no suffix)"] += 1
                seen += 1
        if seen >= most:
            break
    if not seen:
        return None
    common = found.most_common(1)[0][0]
    asked = ", ".join(suffixes)
    return (f"hint: {root} has {seen:,}{'+' if seen >= most else ''} file(s), none ending with "
            f"{asked}; most end with {common}: give --suffix {common}")  # fmt: skip
