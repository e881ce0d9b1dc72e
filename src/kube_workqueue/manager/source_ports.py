"""The source's ports: what the manager core needs from wherever item names and data come from
(the ambassador's `/api/v1/items`, through `manager.sources`), declared once. `ports.py`
re-exports every name here - the core imports them from there, beside the ledger's and the
backend's ports.

`Source` is what every source client is; the `runtime_checkable` protocols after it are what a
source may do besides (hold data until an item is settled, carry groups or priorities, say its
items leave only by retention, bound its retries by a deadline). The core asks
`isinstance(source, SettlesItems)` and the like before it uses one; a source that does none of
them is still a whole source. The errors a source raises are here too: one line each for the
user, and what the caller does next follows from the class (retry later, stop, poll instead).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Protocol, runtime_checkable

from .errors import UserError


class SourceError(Exception):
    """What a `Source` raises when it cannot tell; str() is one line for the user."""


class SourceUnavailable(SourceError):
    """The source did not answer usefully (down, timing out, 5xx): try again later."""


class SourceProtocolError(SourceError, UserError):
    """The source answered, but not in the items API (a wrong URL): retrying will not help."""


class WatchUnsupported(SourceError):
    """The source has no watch stream: poll it instead."""


class Source(Protocol):
    """Where item names and data come from (the ambassador's `/api/v1/items`)."""

    base_url: str
    # The resourceVersion of the last complete listing (its oldest page's), or None when the
    # source gives none: what `manager.runtime.removals` orders listings by.
    listing_version: int | None

    def list_items(self) -> list[str]:
        """Every item name the source lists now; raises `SourceError` when it cannot tell."""

    def get_item(self, name: str) -> dict[str, Any] | None:
        """The item's data, or None when the source no longer has it."""

    def peek(self, name: str) -> dict[str, Any] | None:
        """The data the last listing brought for `name`, if the source lists data (without
        using it up); None otherwise."""

    def watch(
        self, timeout_seconds: int | None = None, read_timeout: float | None = None
    ) -> Iterator[dict[str, str]]:
        """`{"type": "ADDED"|"DELETED", "item": name}` events, every current item first;
        `WatchUnsupported` when the source has none."""

    def keep_data_of(self, wanted: Callable[[str], bool] | None) -> None:
        """From now on keep the data a listing brings (for `get_item` and `peek`) only of the
        items `wanted(name)` says will run (None: of every item). A source whose listings
        bring no data ignores it."""

    def listed_work(self, waiting: int) -> None:
        """Told after each listing how many of its items still wait for work: a source may
        ask for data in bulk while listings bring work, and stop when they bring none."""


@runtime_checkable
class SettlesItems(Protocol):
    """A source that holds what it listed until told an item is settled (a log whose records
    leave by retention: `manager.sources.promised_data`)."""

    def settled(self, name: str) -> None:
        """`name`'s end is recorded for good: what is held for it may go."""


@runtime_checkable
class GroupsItems(Protocol):
    """A source whose listings may carry items' groups (`ItemList.groups`: the tenants' rules
    may group by them, `manager.runtime.tenants`)."""

    def listed_groups(self) -> dict[str, str]:
        """The groups the last complete listing gave, for the items in one."""


@runtime_checkable
class TellsRetention(Protocol):
    """A source that may say its items leave only by retention (a log trimming its oldest
    records: `metadata.removals: retention`) - then what leaves it is never cancelled."""

    retention_only: bool  # as the last listing said


@runtime_checkable
class TellsLog(Protocol):
    """A source that may say what identifies the log it reads, and when that log last started
    over (`metadata.log`: a stream made again - its items are new ones, what ran of the old
    log stays done): the manager says it once, and `status` shows it."""

    log_facts: dict | None  # as the last complete listing said (None: it said none)


@runtime_checkable
class AnswersBy(Protocol):
    """A source that retries within one call (the HTTP client, across a server's restart):
    the caller may bound those retries by a deadline (a monotonic time; None: no bound)."""

    answer_by: float | None


@runtime_checkable
class RanksItems(Protocol):
    """A source whose listings may carry items' priorities (`ItemList.priorities`)."""

    def listed_priorities(self) -> dict[str, int]:
        """The priorities the last complete listing (and the watch events since) gave, for
        the items whose priority is not 0."""
