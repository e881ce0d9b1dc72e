"""A listed item is a promise: the data of every item a log source listed, kept until the item is
settled, whether or not the log still has it.

Why: a log whose every record is an item (`metadata.removals: retention` in its listings) takes
records away by retention - a `MAXLEN`, a `max-msgs`, a purge - oldest first, and never because
an item was done. A manager that listed a record by name and fetched its data only when the
record was about to run (`held_data.py`'s pages) found a record trimmed meanwhile gone: 1,118
of 1,601 records of a burst stayed pending for good under `XTRIM MAXLEN 100`. So from a source
that says its items leave by retention, the manager takes each new item's data as it lists it
(a page of the full view from the first new name, `view=full&startAt=`) and holds it until the
item is settled (succeeded, failed for good, cancelled, done elsewhere): a retry, or a run long
after the trim, still has it. A name whose data cannot be had at that moment was trimmed before
this manager listed it - it is left out of the listing, as if the trim had come first (the docs:
keep the retention longer than the backlog).

The cost is the data of the items waiting (a few hundred bytes each as Python objects), held
only for sources that say so; every other source keeps paging its data as before.

Invariants (under `_lock`): `_data` holds the data of listed items this manager has not
settled; `_handed` is the subset handed to a run (kept for a retry until settled); a name
leaves both only by `settled`, or - not handed, and no longer wanted (done by another manager,
say) - at the next listing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

ONE_BY_ONE = 8  # as many new names as are fetched one GET each rather than as a page
# `tail(start)`: (name, data) of every listed item from `start` on (the full view's pages),
# or None when the source does not serve the full view
TailFetch = Callable[[str], "Iterable[tuple[str, dict]] | None"]
# `one(name)`: the item's data, or None when the source does not have it
OneFetch = Callable[[str], "dict[str, Any] | None"]


class PromisedData:
    def __init__(self, tail: TailFetch, one: OneFetch) -> None:
        self._tail = tail
        self._one = one
        self._data: dict[str, dict] = {}
        self._handed: set[str] = set()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._data)

    def keep(self, names: list[str], wanted: Callable[[str], bool]) -> list[str]:
        """The listing `names` as promised: the data of each wanted name not held yet taken
        now (those the source no longer has are left out of the listing); what is held of
        items no longer wanted and not handed to a run let go."""
        with self._lock:
            for name in [n for n in self._data if n not in self._handed and not wanted(n)]:
                del self._data[name]
            missing = {n for n in names if n not in self._data and wanted(n)}
        if not missing:
            return names
        found = self._fetch(missing)
        with self._lock:
            self._data.update(found)
        if len(found) == len(missing):
            return names
        return [n for n in names if n not in missing or n in found]

    def _fetch(self, missing: set[str]) -> dict[str, dict]:
        found: dict[str, dict] = {}
        tail = self._tail(min(missing)) if len(missing) > ONE_BY_ONE else None
        if tail is not None:
            for name, data in tail:
                if name in missing:
                    found[name] = data
                    if len(found) == len(missing):
                        break
            return found
        for name in sorted(missing):  # a few (a watch event), or no full view: a GET each
            data = self._one(name)
            if data is not None:
                found[name] = data
        return found

    def peek(self, name: str) -> dict[str, Any] | None:
        with self._lock:
            return self._data.get(name)

    def take(self, name: str) -> dict[str, Any] | None:
        """`name`'s promised data for a run (a copy: the run may change it), kept for a retry
        until `settled`; None when none is held."""
        with self._lock:
            data = self._data.get(name)
            if data is None:
                return None
            self._handed.add(name)
            return dict(data)

    def settled(self, name: str) -> None:
        """`name` needs its data no more (its end is recorded for good)."""
        with self._lock:
            self._data.pop(name, None)
            self._handed.discard(name)
