"""Durations and rates as people write them: one parser for every time flag of every command.

    parse_duration("500ms") == 0.5      parse_duration("1h30m") == 5400
    parse_duration("2m") == 120         parse_duration("90") == 90      (bare seconds)
    parse_arrivals("1440/day") == 60    (the interarrival time of that rate, in seconds)
    human(12.5) == "12.5 s"             (and back again, for people)

A duration is one or more `NUMBER UNIT` parts (`ms`, `s`, `m`/`min`, `h`, `d`), largest first
or in any order, summed; a bare number is seconds. Bad text raises `InputError` (a `UserError`)
whose message shows what is accepted.
"""

from __future__ import annotations

import math
import re
import time

from .errors import InputError

UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}
RATE_UNITS = {
    "s": 1.0,
    "sec": 1.0,
    "second": 1.0,
    "m": 60.0,
    "min": 60.0,
    "minute": 60.0,
    "h": 3600.0,
    "hour": 3600.0,
    "d": 86400.0,
    "day": 86400.0,
    "w": 604800.0,
    "week": 604800.0,
}
_NUMBER = r"(?:\d+(?:\.\d*)?|\.\d+)"
_BARE = re.compile(rf"^\s*({_NUMBER})\s*$")
_PART = re.compile(rf"\s*({_NUMBER})\s*(ms|min|s|m|h|d)", re.IGNORECASE)
_RATE = re.compile(rf"^\s*({_NUMBER})\s*/\s*([a-z]+)\s*$", re.IGNORECASE)
EXAMPLES = "500ms, 30s, 2m, 1.5h, 1h30m, 1d or 90"
# the same grammar as a JSON Schema pattern (a chart value's, a WorkQueue field's): bare
# seconds, or NUMBER UNIT parts, in lower case
DURATION_PATTERN = r"^([0-9]+(\.[0-9]+)?|([0-9]+(\.[0-9]+)?(ms|s|m|min|h|d))+)$"


def parse_duration(text: str, *, allow_zero: bool = False) -> float:
    """A duration in seconds, > 0 (>= 0 with `allow_zero`)."""
    if text.strip().startswith("-"):
        raise InputError(f"a duration must be {'>= 0' if allow_zero else '> 0'}: {text!r}")
    seconds = _seconds(text)
    if seconds is None or not math.isfinite(seconds):
        raise InputError(f"not a duration: {text!r} (use e.g. {EXAMPLES})")
    if seconds < 0 or (seconds == 0 and not allow_zero):
        raise InputError(f"a duration must be {'>= 0' if allow_zero else '> 0'}: {text!r}")
    return seconds


def _seconds(text: str) -> float | None:
    bare = _BARE.match(text)
    if bare:
        return float(bare.group(1))
    total, at = 0.0, 0
    for part in _PART.finditer(text):
        if part.start() != at:
            return None
        total += float(part.group(1)) * UNITS[part.group(2).lower()]
        at = part.end()
    if at == 0 or text[at:].strip():
        return None
    return total


def parse_arrivals(text: str) -> float:
    """'1440/day', '30/h', '2/m', '1/s' -> the interarrival time in seconds."""
    match = _RATE.match(text)
    if not match:
        raise InputError(f"not a rate: {text!r} (use e.g. 1440/day, 30/h, 2/m, 1/s)")
    count = float(match.group(1))
    unit = match.group(2).lower()
    unit = unit[:-1] if unit.endswith("s") and unit[:-1] in RATE_UNITS else unit
    if unit not in RATE_UNITS:
        raise InputError(f"unknown time unit in {text!r}: use s, m, h, day or week")
    if count <= 0:
        raise InputError(f"an arrival rate must be > 0: {text!r}")
    return RATE_UNITS[unit] / count


def moment(epoch: float, *, date: bool = False) -> str:
    """A point in time as a person reads it, in local time: 19:20:55, or with `date`
    2026-11-29 19:20:55. The one formatter of status, the dashboard and the manager's log."""
    return time.strftime("%Y-%m-%d %H:%M:%S" if date else "%H:%M:%S", time.localtime(epoch))


def human(value: float | None) -> str:
    """A duration as a person reads it: 500 ms, 12.5 s, 4.2 min, 1.50 h; `never` for an
    infinite wait, `-` for none. The one formatter of every command and the dashboard."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if math.isinf(value):
        return "never" if value > 0 else "-"
    if value >= 3600:
        return f"{value / 3600:.2f} h"
    if value >= 120:
        return f"{value / 60:.1f} min"
    if value >= 1:
        return f"{value:.1f} s"
    return f"{value * 1000:.0f} ms"
