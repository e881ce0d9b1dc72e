"""Every flag of every command also from the environment: `WORKQUEUE_<FLAG>`.

    --parallelism 4        WORKQUEUE_PARALLELISM=4
    --ui-token T           WORKQUEUE_UI_TOKEN=T
    --autoscale            WORKQUEUE_AUTOSCALE=true        (true/false, 1/0, yes/no, on/off)
    --suffix .mp4 …        WORKQUEUE_SUFFIX=.mp4,.mkv      (repeatable flags: comma-separated)

The name is the long flag in capitals with dashes as underscores. A value from the environment
becomes the flag's default, so a flag on the command line always wins; it is checked by the
flag's own parser, and a bad one is one line naming the variable. Options of the command that
runs are read; `--help` and `--version` are not settable.

Where a value came from matters for secrets: a password may come from the environment, never
from the command line (`ps` shows it). `environment_sources` names only the flags whose value
*is* the variable's: a flag typed on the command line as well is the command line's, and is
checked as typed - a variable set in the environment never lets a secret in on the command line.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping

from ..errors import UserError

PREFIX = "WORKQUEUE_"
TRUE = {"1", "true", "yes", "on"}
FALSE = {"0", "false", "no", "off", ""}


def variable(flag: str) -> str:
    """`--ui-token` -> `WORKQUEUE_UI_TOKEN`."""
    return PREFIX + flag.lstrip("-").upper().replace("-", "_")


def long_flag(action: argparse.Action) -> str | None:
    return next((o for o in action.option_strings if o.startswith("--")), None)


def settable(parser: argparse.ArgumentParser):
    """(flag, action) of every long option of `parser` the environment may set."""
    for action in parser._actions:
        flag = long_flag(action)
        if flag is None or isinstance(action, argparse._HelpAction | argparse._VersionAction):
            continue
        yield flag, action


def apply(parser: argparse.ArgumentParser, environ: Mapping[str, str] = os.environ) -> None:
    """Make `WORKQUEUE_<FLAG>` values the defaults of `parser`'s flags; a bad value is
    `parser.error` (one line, exit 2). Which destinations took a value from which variable
    is left in the parsed namespace as `environment_sources` ({dest: variable}), so a value
    checked later (`manager.declared.from_words`) is blamed on the variable too."""
    sources: dict[str, str] = {}
    for flag, action in settable(parser):
        name = variable(flag)
        if name not in environ:
            continue
        try:
            action.default = _value(action, environ[name])
        except (argparse.ArgumentTypeError, ValueError, UserError) as exc:
            parser.error(f"{name}: {exc}")
        action.required = False
        for group in parser._mutually_exclusive_groups:  # (`--source` or `--root`: given)
            if action in group._group_actions:
                group.required = False
        sources[action.dest] = name
        _told_when_typed(action)
    parser.set_defaults(environment_sources=sources)


def _told_when_typed(action: argparse.Action) -> None:
    """`action`, when argparse takes it from the command line (it calls an action only for
    what is typed), drops its destination from the namespace's `environment_sources`."""
    base = type(action)

    class Typed(base):
        def __call__(self, parser, namespace, values, option_string=None):
            sources = dict(getattr(namespace, "environment_sources", None) or {})
            sources.pop(self.dest, None)
            namespace.environment_sources = sources
            super().__call__(parser, namespace, values, option_string)

    Typed.__name__ = Typed.__qualname__ = base.__name__
    action.__class__ = Typed


def _value(action: argparse.Action, text: str):
    if isinstance(action, argparse._StoreTrueAction | argparse._StoreFalseAction):
        word = text.strip().lower()
        if word not in TRUE | FALSE:
            raise ValueError(f"not true or false: {text!r}")
        on = word in TRUE
        return on if isinstance(action, argparse._StoreTrueAction) else not on
    if isinstance(action, argparse._AppendAction):
        return [_one(action, part.strip()) for part in text.split(",") if part.strip()]
    return _one(action, text)


def _one(action: argparse.Action, text: str):
    value = text
    if action.type is not None:
        try:
            value = action.type(text)
        except (argparse.ArgumentTypeError, UserError):
            raise
        except (TypeError, ValueError):  # a plain type such as int: say it as argparse does
            kind = getattr(action.type, "__name__", repr(action.type))
            raise ValueError(f"invalid {kind} value: {text!r}") from None
    if action.choices is not None and value not in action.choices:
        choices = ", ".join(map(str, action.choices))
        raise ValueError(f"invalid choice {text!r} (choose from {choices})")
    return value
