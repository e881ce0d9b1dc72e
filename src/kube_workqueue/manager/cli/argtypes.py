"""argparse value types, and flags built from option declarations.

Each type turns one command-line word into a value or raises `argparse.ArgumentTypeError` with a
message naming the problem, which the CLI prints as its one-line error (exit code 2). Every time
flag takes `duration`: one parser (`manager.durations`) for all of them.

`add_row(parser, row)` adds a run option (`manager.runtime.run_options`) as its flag, its
value parsed by the row's kind. `add_declared(group, cls)` adds the flags a dataclass of
`manager.declared.option` fields declares (a backend's options); `manager.declared.from_words`
builds the dataclass back from the parsed words. Words are parsed there, not here, so a
backend's checks live with the backend.
"""

from __future__ import annotations

import argparse

from ..declared import dest, flags
from ..durations import parse_duration
from ..errors import InputError
from ..parallelism import MAX_PARALLELISM, parallelism_problem
from ..runtime import run_options


def _number(text: str, kind: type, noun: str):
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not {noun}: {text!r}") from None


def positive_int(text: str) -> int:
    value = _number(text, int, "a whole number")
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1: {text!r}")
    return value


MAX_WORKERS = MAX_PARALLELISM  # a manager holds one thread per unit of work it may run at once


def workers(text: str) -> int:
    """A parallelism to start with: a whole number from 1 to MAX_WORKERS."""
    value = positive_int(text)
    problem = parallelism_problem(value, least=1)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return value


def at_most(limit: int, why: str):
    """A positive whole number up to `limit` (`why`: what the limit protects, for the
    message): a typo of a few zeros is refused, not obeyed until the machine gives out."""

    def parse(text: str) -> int:
        value = positive_int(text)
        if value > limit:
            raise argparse.ArgumentTypeError(f"must be at most {limit:,} ({why}): {text!r}")
        return value

    return parse


def from_input(parse):
    """An argparse type from a parser that raises `InputError` (`manager.tenancy.rules`'s):
    its message becomes argparse's one-line error (exit 2)."""

    def typed(text: str):
        try:
            return parse(text)
        except InputError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    typed.__name__ = parse.__name__
    return typed


# a bearer token (`--ui-token`, the token in `--ui-token-file`): the run option's kind
token = from_input(run_options.bearer_token)


def positive_float(text: str) -> float:
    value = _number(text, float, "a number")
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0: {text!r}")
    return value


def fraction(text: str) -> float:
    value = _number(text, float, "a number")
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1: {text!r}")
    return value


def cv(text: str) -> float:
    """A coefficient of variation: a finite number >= 0."""
    value = _number(text, float, "a number")
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0: {text!r}")
    return value


def duration(text: str) -> float:
    """'500ms', '30s', '2m', '1.5h', '1h30m', '1d' or bare seconds; > 0."""
    try:
        return parse_duration(text)
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def duration_or_zero(text: str) -> float:
    """A duration that may be 0 ('0' means at once)."""
    try:
        return parse_duration(text, allow_zero=True)
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_declared(group, cls: type, *, skip: set[str] = frozenset(), seen: set[str] | None = None):
    """Add the flags `cls` declares to `group`, except those in `skip` or already in `seen`
    (which is updated: several backends may declare the same flag)."""
    seen = set() if seen is None else seen
    for field in flags(cls):
        meta = field.metadata
        if meta["flag"] in skip or meta["flag"] in seen:
            continue
        seen.add(meta["flag"])
        placeholder = meta["flag"].lstrip("-").upper().replace("-", "_")  # not the dest's name
        kwargs = {
            "dest": dest(field),
            "help": argparse.SUPPRESS if meta["hidden"] else meta["help"],
        }
        if meta["switch"]:
            kwargs["action"] = "store_true"
        elif meta["repeat"]:
            kwargs.update(action="append", default=[], metavar=meta["metavar"] or placeholder)
        else:
            kwargs["metavar"] = meta["metavar"] or placeholder
            if meta.get("once"):
                kwargs["action"] = GivenOnce
        group.add_argument(meta["flag"], **kwargs)


class GivenOnce(argparse.Action):
    """A flag that may be typed once: a second one is argparse's one-line error, exit 2 (a
    later value silently winning hides which one was meant)."""

    def __call__(self, parser, namespace, values, option_string=None):
        typed = f"_typed_{self.dest}"
        if getattr(namespace, typed, False):
            parser.error(f"{option_string} is given twice: give it once")
        setattr(namespace, typed, True)
        setattr(namespace, self.dest, values)


def add_row(p, row: run_options.RunOption, **overrides) -> None:
    """`row` as a flag of `p`: parsed by its kind (an `InputError` is argparse's one-line
    error, exit 2); `overrides` are argparse's own (another command's help)."""
    kwargs: dict = {"dest": row.name, "help": row.help, "default": row.default}
    if row.switch:
        kwargs["action"] = "store_true"
    else:
        kwargs.update(type=from_input(row.kind.parse), metavar=row.kind.metavar)
        if row.repeat:
            kwargs.update(action="append", default=[])
    kwargs.update(overrides)
    p.add_argument(row.flag, **kwargs)
