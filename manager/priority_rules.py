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
