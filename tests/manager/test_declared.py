"""Options declared once: a dataclass of `option(...)` fields built from what was typed, each
word parsed by its field, errors naming the flag."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from kube_workqueue.manager.declared import dest, flags, from_words, option
from kube_workqueue.manager.durations import parse_duration
from kube_workqueue.manager.errors import UserError


@dataclass(frozen=True)
class Example:
    timeout: float | None = option("--timeout", "how long", parse=parse_duration)
    tag: list[str] = option("--tag", "repeatable", repeat=True)
    loud: bool = option("--loud", "a switch", switch=True)
    name: str = option("--name", "plain", default="x")
    not_a_flag: int = 7


def words(**given):
    return {f"declared_{k}": v for k, v in given.items()}


def test_flags_are_the_declared_fields_and_keep_their_dest():
    assert [f.metadata["flag"] for f in flags(Example)] == [
        "--timeout",
        "--tag",
        "--loud",
        "--name",
    ]
    assert dest(flags(Example)[0]) == "declared_timeout"


def test_untyped_flags_keep_their_defaults():
    assert from_words(Example, {}) == Example(None, [], False, "x")


def test_typed_words_are_parsed_and_given_values_win():
    built = from_words(
        Example, words(timeout="1h30m", tag=["a", "b"], loud=True, name="y"), name="z"
    )
    assert built == Example(5400.0, ["a", "b"], True, "z")


def test_a_bad_word_is_a_user_error_naming_the_flag():
    with pytest.raises(UserError, match=r"^--timeout: not a duration"):
        from_words(Example, words(timeout="soon"))
