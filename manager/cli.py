"""The `workqueue` command: one entry point, one sub-command per capability.

Each sub-command lives beside the code it drives and registers itself here through a
`add_parser(subparsers)` function whose parser sets `func`. User mistakes raise `UserError` (or
argparse errors) and become one line on stderr with exit code 2 - never a traceback.
"""

from __future__ import annotations

import argparse
import sys

from .argtypes import fraction, positive_float, positive_int


class UserError(Exception):
    """A mistake the user can fix: printed as one line, exit code 2."""


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one line (with where to look), not a usage dump."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _add_lab_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "lab",
        help="seed 000's firehose lab: watch the queue absorb adds",
        description="Fire adds at a rate onto a few keys and watch the queue dedup them.",
    )
    p.add_argument("--rate", type=positive_float, help="adds per second (default 50000)")
    p.add_argument("--keys", type=positive_int, help="distinct hot keys (default 20)")
    p.add_argument("--duration", type=positive_float, default=10.0, help="seconds (default 10)")
    p.add_argument("--workers", type=positive_int, default=5, help="workers (default 5)")
    p.add_argument("--work-ms", type=positive_float, help="reconcile time in ms (default 5)")
    p.add_argument("--fail-rate", type=fraction, default=0.1, help="failure share (0.1)")
    p.add_argument("--slow", action="store_true", help="slow motion, one line per event")
    p.add_argument("--seed", type=int, help="random seed for a repeatable run")
    p.set_defaults(func=_run_lab)


def _run_lab(args) -> int:
    from .lab import SLOW_DEFAULTS, LabConfig, run_lab

    defaults = SLOW_DEFAULTS if args.slow else {}
    config = LabConfig(
        rate=args.rate or defaults.get("rate", 50_000.0),
        keys=args.keys or defaults.get("keys", 20),
        duration=args.duration,
        workers=args.workers,
        work_ms=args.work_ms or defaults.get("work_ms", 5.0),
        fail_rate=args.fail_rate,
        slow=args.slow,
        seed=args.seed,
    )
    run_lab(config)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="workqueue",
        description="Run a container (or a command) once for every item a source lists.",
    )
    subparsers = parser.add_subparsers(
        dest="subcommand", required=True, metavar="COMMAND", parser_class=OneLineParser
    )
    _add_lab_parser(subparsers)
    # The front door is the one place manager/ reaches into ambassador/ (besides `workqueue run`,
    # which starts an ambassador in-process and takes its folder options): its sub-command is
    # defined beside its code.
    from ambassador.server import add_parser as add_ambassador_parser

    add_ambassador_parser(subparsers, UserError)
    from .commands import add_parsers as add_manager_parsers

    add_manager_parsers(subparsers, UserError)
    from .stability_cli import add_parser as add_stability_parser

    add_stability_parser(subparsers, UserError)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # Everything after the first "--" is a worker command (`workqueue run DIR -- CMD ARGS…`),
    # kept word for word: never parsed as our options, never joined into a shell string.
    trailing: list[str] | None = None
    if "--" in argv:
        cut = argv.index("--")
        argv, trailing = argv[:cut], argv[cut + 1 :]
    parser = build_parser()
    args = parser.parse_args(argv)
    if trailing is not None and not hasattr(args, "command"):
        parser.error(f"workqueue {args.subcommand} takes no command after --")
    if hasattr(args, "command"):
        args.command = trailing or []
    try:
        return int(args.func(args) or 0)
    except UserError as exc:
        print(f"workqueue {args.subcommand}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `workqueue lab | head`: the reader left; that is not an error
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
