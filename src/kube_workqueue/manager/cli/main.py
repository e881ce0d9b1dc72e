"""The `workqueue` command: one entry point, one sub-command per module of `manager.cli`.

Each command module has `add_parser(subparsers)` (its parser sets `func`) and turns its flags
into typed options before calling below. This is the one place where mistakes become messages:
a `UserError` raised anywhere (or an argparse error) is one line on stderr and exit code 2 -
never a traceback.
"""

from __future__ import annotations

import argparse
import atexit
import faulthandler
import os
import re
import signal
import sys
import threading
from typing import NoReturn

from .. import installed_version
from ..errors import UserError
from ..faults import StorageFault
from . import environment
from .interrupts import Interrupted, said, stop_early
from .log_options import LONG_RUNNING, add_log_options, setup_logging
from .report import ForPeople, one_line


class VersionAction(argparse.Action):
    """`--version`, looked up only when asked (importlib.metadata costs every command 25 ms)."""

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"workqueue {installed_version()}")
        parser.exit()


def subcommand_parser(parser: argparse.ArgumentParser, name: str):
    """The parser of the command `name`, or None when there is no such command."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices.get(name)
    return None


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one line (with where to look), not a usage dump; and a
    value that starts with a dash and a digit (`--timeout -5s`, `--parallelism -1`) is a
    value - refused by its type with a reason - not an unknown option."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = re.compile(r"^-\.?\d")

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {one_line(message)} (see {self.prog} --help)\n")


# Which module defines each command (its `add_parser` adds its commands' parsers), so that a
# command builds only its own parser: building all of them imported every command's module
# (the ambassador's server, the sources, the lab), 0.10 s of CPU before any command began
# against 0.06 s for `status`'s alone. A test checks this table against the full parser.
COMMAND_MODULES = {
    "lab": "lab_cmd",
    "ambassador": "kube_workqueue.ambassador.server",
    "manager": "manager_cmd",
    "run": "run_cmd",
    "operator": "operator_cmd",
    **dict.fromkeys(("status", "pause", "resume", "drain", "scale", "retry"), "queue_cmds"),
    "ledger": "ledger_cmd",
    "stability": "stability_cmd",
    "simulate": "simulate_cmd",
    "plan": "plan_cmd",
    # `completion` reads every command's flags: it is always built with all of them
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The `workqueue` parser: every command's, or - given the `command` the arguments name -
    only that command's module's (the same parsers, with the same help), when it is one of
    `COMMAND_MODULES`."""
    parser = OneLineParser(
        prog="workqueue",
        description="Run a container (or a command) once for every item a source lists.",
    )
    parser.add_argument("--version", action=VersionAction, nargs=0, help="print the version")
    subparsers = parser.add_subparsers(
        dest="subcommand", required=True, metavar="COMMAND", parser_class=OneLineParser
    )
    wanted = COMMAND_MODULES.get(command)  # (None: every command's)
    for module in dict.fromkeys(COMMAND_MODULES.values()):
        if wanted is None or module == wanted:
            _add_parsers(module, subparsers)
    if wanted is None:
        from . import completion_cmd

        completion_cmd.add_parser(subparsers, parser)
    for name in LONG_RUNNING:
        if name in subparsers.choices:
            add_log_options(subparsers.choices[name], default=LONG_RUNNING[name])
    return parser


def _add_parsers(module: str, subparsers) -> None:
    """The parsers of the commands `module` (a value of `COMMAND_MODULES`) defines."""
    import importlib

    if module == "kube_workqueue.ambassador.server":
        # The ambassador's command is defined beside its code (ambassador/ never imports
        # manager/, so it is handed the error class to raise).
        from kube_workqueue.ambassador.server import add_parser as add_ambassador_parser

        from .argtypes import duration_or_zero

        add_ambassador_parser(subparsers, UserError, duration_or_zero)
        return
    importlib.import_module(f"{__package__}.{module}").add_parser(subparsers)


def main(argv: list[str] | None = None) -> int:
    stop_early()
    _dump_threads_on_a_crash()
    stdout = sys.stdout
    sys.stdout = ForPeople(stdout)  # names never reach a terminal raw
    subcommand: list[str | None] = [None]
    try:
        return _main(argv, subcommand)
    except (Interrupted, KeyboardInterrupt) as exc:
        stopped = exc if isinstance(exc, Interrupted) else Interrupted(signal.SIGINT)
        print(said(subcommand[0], stopped, runs_work=subcommand[0] in RUNS_WORK), file=sys.stderr)
        return 128 + stopped.signum
    finally:
        sys.stdout = stdout


def console() -> NoReturn:
    """The `workqueue` command (pyproject's script and `python -m kube_workqueue.manager.cli`):
    `main`, then `leave` with its code."""
    leave(main())


def leave(code: int) -> NoReturn:
    """Exit with `code`. When threads still run (a watch, a cache, a start cut short by a
    signal: daemon threads nobody joins), the exit handlers run and the streams are flushed
    as usual, then the process ends without the interpreter's teardown: tearing it down under
    running daemon threads aborted a Kubernetes manager stopped while starting (SIGABRT, seen
    1 in ~40 under load, every thread's stack from faulthandler showing none of ours). Threads
    not marked daemon are waited for first, as a normal exit would."""
    main_thread = threading.main_thread()
    others = [t for t in threading.enumerate() if t is not main_thread and t.is_alive()]
    if not others:
        sys.exit(code)
    # What a normal exit does first, in its order: threads' exit callbacks (a thread pool's
    # shutdown) and the join of every non-daemon thread, then the exit handlers (logging's
    # flush, weakref finalizers). Private, but the very functions Python's exit calls.
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more can be said
            pass
    os._exit(code)


def _dump_threads_on_a_crash() -> None:
    """Should the interpreter ever abort (a fatal error, SIGABRT, SIGSEGV), every thread's
    stack goes to stderr: the one report a user can send us. Not where stderr is no file (a
    test's capture)."""
    try:
        faulthandler.enable(file=sys.stderr, all_threads=True)
    except (AttributeError, ValueError, OSError):
        pass


RUNS_WORK = {"run", "manager"}  # commands that start units of work


def _main(argv: list[str] | None, subcommand: list[str | None]) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # Everything after the first "--" is a worker command (`workqueue run DIR -- CMD ARGS…`),
    # kept word for word: never parsed as our options, never joined into a shell string.
    trailing: list[str] | None = None
    if "--" in argv:
        cut = argv.index("--")
        argv, trailing = argv[:cut], argv[cut + 1 :]
    parser = build_parser(argv[0] if argv else None)
    if any("\0" in word for word in argv + (trailing or [])):  # no path or name holds one
        parser.error("an argument contains a NUL character")
    if argv and argv[0].startswith("-") and argv[0] not in ("-h", "--help", "--version"):
        parser.error(f"unknown option {argv[0]!r}: the command comes first")
    command = subcommand_parser(parser, argv[0]) if argv else None
    if command is not None:
        environment.apply(command)  # WORKQUEUE_<FLAG>: defaults that flags override
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # said by the command's parser: `workqueue run: … (see workqueue run --help)`
        (command or parser).error(f"unrecognized arguments: {' '.join(unknown)}")
    subcommand[0] = args.subcommand
    if trailing is not None and not hasattr(args, "command"):
        parser.error(f"workqueue {args.subcommand} takes no command after --")
    if hasattr(args, "command"):
        args.command = trailing or []
    if hasattr(args, "log_format"):
        setup_logging(args.log_format, args.log_level)
    try:
        return int(args.func(args) or 0)
    except UserError as exc:
        print(f"workqueue {args.subcommand}: error: {one_line(str(exc))}", file=sys.stderr)
        return 2
    except StorageFault as exc:  # the machine's fault, not the user's: its own exit code
        print(f"workqueue {args.subcommand}: error: {one_line(str(exc))}", file=sys.stderr)
        return 3
    except BrokenPipeError:  # `workqueue lab | head`: the reader left; that is not an error
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
