"""A queue's tenants as the operator writes them: which group an item is, and each group's rules.

    --group '^([^/]+)/'          an item's group: the first capture of the pattern on its name
    --limit 'acme=2' --limit '*=5'     at most N of a matching group run at once (0: held)
    --rate 'acme=100/1m'         at most N starts of a matching group in any PERIOD
    --fair --weight 'gold-*=3'   the next free slot to the group furthest below its share

Every rule is `GLOB=VALUE`, a shell-style glob (`fnmatch`) matched against the whole group
name; rules are tried in the order given and the first that matches wins (`*=N` last gives
every other group N each). An item without a group - the pattern did not match, the source
gave none - is in no group: no limit or rate holds it, and for fair share the ungrouped items
are one tenant of their own (weight 1).

An item's group comes from the pattern first (the operator's word), else from what its source
says (`data.group` of an items-API listing's full view, a Redis hash's JSON), else none
(`Grouping.of`). Parsing raises `InputError` with a one-line message (without the flag's
name: the command line puts it in front, and makes it its exit 2).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from ..durations import RATE_UNITS, parse_duration
from ..errors import InputError
from ..patterns import Pattern, compile_regex
from ..priority_rules import Rules

MOST_GROUP_CHARS = 253  # a group is a label on metrics and a column: as long as a DNS name
LIMIT_CEILING = 4096  # a group's limit never needs to exceed a manager's most workers


def group_pattern(text: str) -> Pattern:
    """`--group REGEX`: a regular expression with at least one capture group, matched in
    linear time (`manager.patterns`: a tenant's pattern runs on every item's name)."""
    pattern = compile_regex(text)
    if pattern.groups < 1:
        raise InputError(f"wants a capture group, the group's name (e.g. '^([^/]+)/'): {text!r}")
    return pattern


def _split(text: str, example: str) -> tuple[str, str]:
    glob, sep, value = text.rpartition("=")
    if not sep or not glob:
        raise InputError(f"wants GLOB={example}: {text!r}")
    if glob.count("[") != glob.count("]"):
        raise InputError(f"the glob has a [ that nothing closes: {text!r}")
    return glob, value.strip()


def limit_rule(text: str) -> tuple[str, int]:
    """`GLOB=N` (`--limit`): N whole, 0 (the group is held) to `LIMIT_CEILING`."""
    glob, value = _split(text, "N (for example 'acme=2')")
    if not value.isdigit() or int(value) > LIMIT_CEILING:
        raise InputError(f"wants a whole number from 0 to {LIMIT_CEILING}: {text!r}")
    return glob, int(value)


def rate_rule(text: str) -> tuple[str, tuple[int, float]]:
    """`GLOB=N/PERIOD` (`--rate`): (glob, (N, seconds)); PERIOD is a duration (`10s`, `1m`)
    or a unit (`s`, `m`, `h`, `day`)."""
    glob, value = _split(text, "N/PERIOD (for example 'acme=100/1m')")
    count, slash, period = value.partition("/")
    if not slash or not count.strip().isdigit() or int(count) < 1:
        raise InputError(f"wants N/PERIOD with N a whole number >= 1: {text!r}")
    unit = period.strip().lower()
    if unit in RATE_UNITS:
        seconds = RATE_UNITS[unit]
    else:
        try:
            seconds = parse_duration(period)
        except InputError:
            raise InputError(f"not a period (use e.g. 10s, 1m, h, day): {text!r}") from None
    return glob, (int(count), seconds)


def weight_rule(text: str) -> tuple[str, float]:
    """`GLOB=W` (`--weight`): a finite number > 0 (a weight of 0 would starve the group:
    hold it with `--limit GLOB=0` instead)."""
    glob, value = _split(text, "W (for example 'gold-*=3')")
    try:
        weight = float(value)
    except ValueError:
        weight = math.nan
    if not (weight > 0 and math.isfinite(weight)):
        raise InputError(f"wants a number > 0 (hold a group with --limit GLOB=0): "
                         f"{text!r}")  # fmt: skip
    return glob, weight


def rate_text(rate: tuple[int, float]) -> str:
    """(100, 60.0) -> '100/1m': how status and the log write a rate."""
    count, seconds = rate
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size and seconds % size == 0:
            amount = int(seconds // size)
            return f"{count}/{amount}{unit}"
    return f"{count}/{seconds:g}s"


@dataclass
class TenancyOptions:
    """The manager's tenancy flags, as data (`ManagerOptions.tenancy`)."""

    group: str | None = None  # --group REGEX
    limits: list[tuple[str, int]] = field(default_factory=list)
    rates: list[tuple[str, tuple[int, float]]] = field(default_factory=list)
    fair: bool = False
    weights: list[tuple[str, float]] = field(default_factory=list)

    def __bool__(self) -> bool:
        """Whether any of it is asked for (else the line stays as it was: no cost)."""
        return bool(self.group or self.limits or self.rates or self.fair or self.weights)

    def facts(self) -> dict:
        """What `status` in another process needs to say the same (the manager's facts)."""
        return {
            "group": self.group,
            "limits": [[g, n] for g, n in self.limits],
            "rates": [[g, n, s] for g, (n, s) in self.rates],
            "fair": self.fair,
            "weights": [[g, w] for g, w in self.weights],
        }

    @classmethod
    def from_facts(cls, facts: dict | None) -> TenancyOptions:
        """Back from `facts()` (a manager's facts; anything malformed is left out)."""
        facts = facts or {}
        options = cls(group=facts.get("group") if isinstance(facts.get("group"), str) else None)
        options.limits = [(str(g), int(n)) for g, n in _pairs(facts.get("limits"), 2)]
        options.rates = [(str(g), (int(n), float(s))) for g, n, s in _pairs(facts.get("rates"), 3)]
        options.fair = bool(facts.get("fair"))
        options.weights = [(str(g), float(w)) for g, w in _pairs(facts.get("weights"), 2)]
        return options


def _pairs(value: object, size: int) -> list:
    if not isinstance(value, list):
        return []
    return [v for v in value if isinstance(v, list | tuple) and len(v) == size]


class Grouping:
    """An item's group (see the module docstring): the pattern's first capture, else what the
    source listed (`listed()`: a name -> group map, asked each time), else None. Groups are
    remembered per name: an item's group does not change while it waits or runs."""

    def __init__(self, pattern: str | None, listed: Callable[[], dict[str, str]] | None = None):
        self.pattern = group_pattern(pattern) if pattern else None
        self._listed = listed or dict
        self._known: dict[str, str | None] = {}

    def of(self, name: str) -> str | None:
        try:
            return self._known[name]
        except KeyError:
            pass
        group = None
        if self.pattern is not None:
            found = self.pattern.search(name)
            if found is not None and found.group(1):
                group = found.group(1)
        if group is None:
            group = valid_group(self._listed().get(name))
            if group is None:
                return None  # not remembered: a later listing may carry its data
        if len(self._known) > 1_000_000:  # a name seen once long ago is found again
            self._known.clear()
        self._known[name] = group
        return group

    def forget(self, name: str) -> None:
        self._known.pop(name, None)


def valid_group(value: object) -> str | None:
    """A group a source gave, or None when it is not one (not a string, empty, too long, or
    holding a control character: a group reaches logs and metric labels)."""
    if not isinstance(value, str) or not value or len(value) > MOST_GROUP_CHARS:
        return None
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        return None
    return value


class GroupRules:
    """Each group's limit, rate and weight, the first matching rule's (see the module
    docstring), looked up once per group."""

    def __init__(self, options: TenancyOptions) -> None:
        self.options = options
        self._limits = Rules(options.limits)
        self._rates = Rules(options.rates)
        self._weights = Rules(options.weights)
        self._seen: dict[str, tuple[int | None, tuple[int, float] | None, float]] = {}

    def of(self, group: str | None) -> tuple[int | None, tuple[int, float] | None, float]:
        """(limit or None, (N, seconds) or None, weight) of `group`; no group: none, 1."""
        if group is None:
            return None, None, 1.0
        try:
            return self._seen[group]
        except KeyError:
            weight = self._weights.of(group)
            found = (
                self._limits.of(group),
                self._rates.of(group),
                1.0 if weight is None else weight,
            )
            self._seen[group] = found
            return found


def asked_rules(value: object) -> tuple[list | None, list | None]:
    """(limits, rates) from what `workqueue scale --limit/--rate` left with the queue - a
    mapping whose `limits` and `rates` are lists of rules as the flags write them
    (`["acme=2", "*=5"]`, `["acme=100/1m"]`); either None when not asked. A rule that does
    not parse (a hand edit) is left out: the others hold."""
    if not isinstance(value, dict):
        return None, None
    found: list[list | None] = []
    for key, parse in (("limits", limit_rule), ("rates", rate_rule)):
        rules = value.get(key)
        if not isinstance(rules, list):
            found.append(None)
            continue
        parsed = []
        for text in rules:
            try:
                parsed.append(parse(text))
            except (InputError, TypeError, AttributeError):
                continue
        found.append(parsed)
    return found[0], found[1]


def rule_texts(limits: list | None = None, rates: list | None = None) -> dict:
    """The asked form (`asked_rules`) of parsed limits and rates (None: not asked)."""
    asked: dict = {}
    if limits is not None:
        asked["limits"] = [f"{glob}={n}" for glob, n in limits]
    if rates is not None:
        asked["rates"] = [f"{glob}={rate_text(rate)}" for glob, rate in rates]
    return asked
