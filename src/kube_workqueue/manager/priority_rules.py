"""The manager's `--priority GLOB=N` rules: an item's priority from its name.

Shell-style globs (`*` crosses `/`; matched in linear time: `manager.patterns`) matched
against the whole item name, in the order given; the first that matches gives the item's
priority (higher starts first). The manager applies them before the source's priorities
(`manager.runtime.priorities`), and leaves them in its facts, so that `workqueue status` in
another process orders the line the same way (`manager.views.queue_view.from_record`).
"""

from __future__ import annotations

from collections.abc import Iterable

from .errors import InputError
from .items import PRIORITY_LIMIT
from .patterns import compile_globs, first_glob


def parse_rule(text: str) -> tuple[str, int]:
    """`GLOB=N` (`--priority`, a WorkQueue's `spec.priorities`) as (glob, N); `InputError`
    with one line when it is not one."""
    glob, sep, number = text.rpartition("=")
    if not sep or not glob:
        raise InputError(f"wants GLOB=N (for example 'urgent/*=10'): {text!r}")
    try:
        priority = int(number.strip())
    except ValueError:
        raise InputError(f"not an integer priority: {number.strip()!r}") from None
    if abs(priority) > PRIORITY_LIMIT:
        raise InputError(f"a priority is within ±{PRIORITY_LIMIT}: {text!r}")
    if unclosed_bracket(glob):
        raise InputError(
            f"the glob has a [ that nothing closes (for a [ itself write [[]): {text!r}"
        )
    return glob, priority


def unclosed_bracket(glob: str) -> bool:
    """Whether a shell-style glob opens a [set] it never closes (fnmatch would quietly take
    the [ as itself: a glob that meant a set would match nothing it was meant to)."""
    i = 0
    while i < len(glob):
        if glob[i] == "[":
            j = i + 1
            if j < len(glob) and glob[j] in "!^":
                j += 1
            if j < len(glob) and glob[j] == "]":
                j += 1
            close = glob.find("]", j)
            if close == -1:
                return True
            i = close
        i += 1
    return False


class Rules:
    """`GLOB=VALUE` rules (`--priority`, and tenancy's limits, rates and weights) as one
    linear-time pattern (`manager.patterns`): the first rule whose glob matches the whole name
    gives its value."""

    def __init__(self, rules: Iterable[tuple[str, object]]) -> None:
        self.rules = list(rules)
        self._values = [value for _, value in self.rules]
        self._pattern = compile_globs([glob for glob, _ in self.rules]) if self.rules else None

    def __bool__(self) -> bool:
        return bool(self.rules)

    def of(self, name: str):
        """The first matching rule's value; None when none matches."""
        if self._pattern is None:
            return None
        index = first_glob(self._pattern, name)
        return None if index is None else self._values[index]
