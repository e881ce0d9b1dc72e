"""What a person typed for the Kubernetes backend's options, as typed values.

Each function takes one flag's words (or a chart value's, a WorkQueue field's: the same words)
and returns the value `options.KubeOptions` holds, or raises a `UserError` naming what is
wrong, so a bad value is refused before any API call. The JSON Schemas beside them say what
each takes where a chart value or a WorkQueue field holds it (`manager.declared`: a place may
be stricter, never looser).
"""

from __future__ import annotations

import math
from typing import Any

from ...declared import option
from ...durations import DURATION_PATTERN, parse_duration
from ...errors import UserError
from .manifests import objects as ko


def key_values(words: list[str]) -> dict[str, str]:
    out = {}
    for word in words:
        key, sep, value = word.partition("=")
        if not sep or not key:
            raise UserError(f"takes KEY=VALUE, got {word!r}")
        out[key] = value
    return out


def pairs(flag: str, help: str, check) -> Any:
    """A repeatable `K=V` flag gathered into a dict, each pair checked by `check` (a
    `validation` function, which raises `UserError` naming what is wrong)."""
    return option(
        flag,
        help,
        default={},
        repeat=True,
        metavar="K=V",
        parse=lambda words: check(key_values(words)),
    )


def toleration(word: str) -> dict[str, str]:
    head, sep, effect = word.rpartition(":")
    if not sep or effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
        raise UserError(f"takes KEY[=VALUE]:EFFECT, got {word!r}")
    key, eq, value = head.partition("=")
    out = {"key": key, "effect": effect, "operator": "Equal" if eq else "Exists"}
    if eq:
        out["value"] = value
    return out


# the JSON Schemas of the words the parsers below take, as a chart value or a WorkQueue field
# holds them (`manager.declared`: a place may be stricter, never looser)
STRING = {"type": "string"}
WHOLE = {"type": "integer", "minimum": 0}
DURATION = {"type": "string", "pattern": DURATION_PATTERN}
EXIT_CODES = {"type": "array", "items": {"type": "integer", "minimum": 1, "maximum": 255}}
BATCH_MOST = 100_000  # the items one Indexed Job may hold


def whole(text: str) -> int:
    """A whole number >= 0."""
    try:
        value = int(text)
    except ValueError:
        raise UserError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise UserError(f"must be >= 0: {text!r}")
    return value


def batch_size(text: str) -> int:
    """1 to 100,000: what an Indexed Job with per-index retries may hold."""
    value = whole(text)
    if not 1 <= value <= BATCH_MOST:
        raise UserError(f"must be 1 to 100000 (the items one Indexed Job may hold): {text!r}")
    return value


def seconds(text: str) -> float:
    """A duration > 0 (`manager.durations`: 500ms, 30s, 2m, 1h30m or bare seconds)."""
    return parse_duration(text)


def seconds_or_zero(text: str) -> float:
    return parse_duration(text, allow_zero=True)


def whole_seconds(text: str) -> int:
    """A duration for a field the API keeps in whole seconds (rounded up, so never shorter)."""
    return math.ceil(parse_duration(text))


def whole_seconds_or_zero(text: str) -> int:
    return math.ceil(parse_duration(text, allow_zero=True))


def rate(text: str) -> float:
    """API calls per second, >= 0 (0: no limit)."""
    try:
        value = float(text)
    except ValueError:
        raise UserError(f"not a number: {text!r}") from None
    if not 0 <= value < float("inf"):
        raise UserError(f"must be >= 0: {text!r}")
    return value


def exit_codes(text: str) -> tuple[int, ...]:
    """A comma-separated list of exit codes 1-255 (`2,3`)."""
    codes = []
    for word in text.split(","):
        word = word.strip()
        if not word.isdigit() or not 1 <= int(word) <= 255:
            raise UserError(f"takes exit codes from 1 to 255, comma-separated, got {text!r}")
        codes.append(int(word))
    return tuple(sorted(set(codes)))


def queue_name(text: str) -> str:
    try:
        return ko.check_queue_name(text)
    except ko.InvalidQueueName as exc:
        raise UserError(str(exc)) from None


def pod_spec(path: str) -> dict[str, Any]:
    import yaml

    try:
        with open(path, encoding="utf-8") as f:
            patch = yaml.safe_load(f)
    except (OSError, yaml.YAMLError) as exc:
        raise UserError(f"cannot read {path}: {exc}") from None
    if not isinstance(patch, dict):
        raise UserError(f"{path} is not a mapping (a partial pod spec)")
    return patch
