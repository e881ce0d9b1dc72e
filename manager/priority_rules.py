"""The manager's `--priority GLOB=N` rules: an item's priority from its name.

Shell-style globs (`fnmatch`: `*` crosses `/`) matched against the whole item name, in the
order given; the first that matches gives the item's priority (higher starts first). The
manager applies them before the source's priorities (`manager.runtime.priorities`), and leaves
them in its facts, so that `workqueue status` in another process orders the line the same way
(`manager.views.queue_view.from_record`).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable

from .errors import InputError
from .items import PRIORITY_LIMIT


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
    """The manager's `--priority` rules as one regular expression: the first alternative that
    matches is the first rule that matches (Python's alternation is tried in order)."""

    def __init__(self, rules: Iterable[tuple[str, int]]) -> None:
        self.rules = list(rules)
        self._priority_of_group = [priority for _, priority in self.rules]
        parts = [f"(?P<r{i}>{fnmatch.translate(glob)})" for i, (glob, _) in enumerate(self.rules)]
        self._match = re.compile("|".join(parts), re.DOTALL).match if parts else None

    def __bool__(self) -> bool:
        return bool(self.rules)

    def of(self, name: str) -> int | None:
        """The first matching rule's priority; None when none matches."""
        if self._match is None:
            return None
        found = self._match(name)
        if found is None:
            return None
        return self._priority_of_group[found.lastindex - 1 if found.lastindex else 0]
