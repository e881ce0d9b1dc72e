"""Patterns from users and tenants match in linear time (RE2), and globs mean what fnmatch
says they mean."""

from __future__ import annotations

import fnmatch

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kube_workqueue.manager.errors import InputError
from kube_workqueue.manager.patterns import compile_globs, compile_regex, first_glob
from kube_workqueue.manager.priority_rules import Rules
from kube_workqueue.manager.tenancy.rules import Grouping, group_pattern


def test_the_attackers_pattern_ends_on_a_long_name():
    """`^(a+)+$` backtracks for ever in `re` on `aaaa…!`; RE2 answers at once (were it `re`,
    this test would not end within the suite's timeout)."""
    grouping = Grouping("^(a+)+$")
    assert grouping.of("a" * 5000 + "!") is None
    assert grouping.of("aaa") == "aaa"


def test_what_re2_cannot_do_is_one_line_naming_why():
    with pytest.raises(InputError, match="lookaround and backreferences"):
        group_pattern(r"(a)\1")
    with pytest.raises(InputError, match="lookaround"):
        group_pattern(r"^(?=x)(.)")
    with pytest.raises(InputError, match="not a regular expression"):
        compile_regex("(unclosed")
    with pytest.raises(InputError, match="capture group"):
        group_pattern("^[a-z]+/")


GLOB_CHARS = st.text(alphabet="ab/.*?[]!^-\\", max_size=8)
NAMES = st.text(alphabet="ab/.[]!^-\\\n", max_size=8)


@settings(max_examples=400, deadline=None)
@given(glob=GLOB_CHARS, name=NAMES)
def test_a_glob_matches_what_fnmatch_matches(glob, name):
    pattern = compile_globs([glob])
    assert (first_glob(pattern, name) == 0) == fnmatch.fnmatchcase(name, glob)


def test_the_first_rule_that_matches_wins():
    rules = Rules([("urgent/*", 10), ("*.mp4", 5), ("*", 1)])
    assert rules.of("urgent/a.mp4") == 10
    assert rules.of("b.mp4") == 5
    assert rules.of("c.txt") == 1
    assert Rules([("x*", 1)]).of("y") is None
    assert Rules([]).of("y") is None
