"""argparse value types shared by the manager's sub-commands.

Each turns one command-line word into a value or raises `argparse.ArgumentTypeError` with a
message naming the problem, which the CLI prints as its one-line error (exit code 2).
"""

from __future__ import annotations

import argparse


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


def positive_float(text: str) -> float:
    value = _number(text, float, "a number")
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0: {text!r}")
    return value


def positive_seconds(text: str) -> float:
    value = _number(text, float, "a number of seconds")
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0 seconds: {text!r}")
    return value


def fraction(text: str) -> float:
    value = _number(text, float, "a number")
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1: {text!r}")
    return value


def duration(text: str) -> float:
    """'500ms', '30s', '2m', '1.5h', '1d' or bare seconds."""
    from .scaling import InputError, parse_duration

    try:
        return parse_duration(text)
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
