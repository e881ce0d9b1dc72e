"""One duration parser for every time flag: units, compound durations, bare seconds, and what
is refused; and arrival rates."""

from __future__ import annotations

import pytest

from kube_workqueue.manager.durations import parse_arrivals, parse_duration
from kube_workqueue.manager.errors import InputError, UserError


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("500ms", 0.5),
        ("30s", 30),
        ("2m", 120),
        ("1.5h", 5400),
        ("1d", 86400),
        ("90", 90),
        (" 2 M ", 120),
    ],
)
def test_durations(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("text", "interarrival"),
    [
        ("1440/day", 60),
        ("30/h", 120),
        ("2/m", 30),
        ("1/s", 1),
        ("7/week", 86400),
        ("3/hours", 1200),
    ],
)
def test_arrival_rates(text, interarrival):
    assert parse_arrivals(text) == pytest.approx(interarrival)


@pytest.mark.parametrize("text", ["", "abc", "-5s", "0", "5x", "1e3"])
def test_bad_durations(text):
    with pytest.raises(InputError):
        parse_duration(text)


@pytest.mark.parametrize("text", ["5", "0/h", "5/fortnight", "/h"])
def test_bad_rates(text):
    with pytest.raises(InputError):
        parse_arrivals(text)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("1h30m", 5400), ("2m30s", 150), ("1d2h", 93600), ("1m500ms", 60.5), ("1H 30M", 5400)],
)
def test_compound_durations(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["1h30", "h30m", "1h 30", "30m1h1", "nan", "inf", "1e400"])
def test_bad_compound_durations(text):
    with pytest.raises(InputError):
        parse_duration(text)


def test_zero_only_when_allowed_and_errors_are_user_errors():
    assert parse_duration("0", allow_zero=True) == 0
    assert parse_duration("0s", allow_zero=True) == 0
    with pytest.raises(UserError, match="must be > 0"):
        parse_duration("0")
