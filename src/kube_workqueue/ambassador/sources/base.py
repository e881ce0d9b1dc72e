"""The interface every source ambassador backend implements, and what some of them do better.

A source answers two questions - which items exist (a sorted list of names) and what one item's
data is - and may push changes to watchers. Another backend (object storage, a message queue)
implements the same methods and the API in api.py serves it unchanged; `workqueue run` reads it
in-process (`manager/sources/folder.py`) through the same methods.

What only some sources do is declared as protocols of their own, and the code that profits
from them asks `isinstance`, never an attribute: `ServesPrebuilt` (a gunicorn worker's shared
snapshot: the listing's JSON and the watch's first lines built once a version; `ReadsPages`, a
page of its items' data through one look at the newest version), `HoldsPacked`
(a listed source: the listing already as the publisher writes it), `StreamsEvents` (a watch's
later events without a copy of the names), `CountsBacklog` (a log's records read and not yet
served), `Ranks` and `RanksMetas` (priorities). A lister's own (`listers.py`): `Resumes`,
`HoldsBacklog`, `HoldsConnection`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from ..timed_queue import TimedQueue


class Source(Protocol):
    problem: str | None  # why the source cannot be read now (readyz says it), or None

    def start(self) -> None:
        """Begin tracking items (initial listing, background refresh)."""

    def stop(self, wait: bool = True) -> None:
        """Stop background work; idempotent. `wait=False`: its threads are not waited for (a
        run that is over, or one that stops following a source that cannot change)."""

    def page(self, after: str | None, limit: int | None) -> tuple[list[str], int, int]:
        """Sorted names strictly after `after`, at most `limit`; plus the number remaining after
        the page and a version that changes whenever the listing does."""

    def get(self, name: str) -> dict[str, Any] | None:
        """The item's data, or None when `name` is not an item (never raises for bad names)."""

    def subscribe(self) -> tuple[list[str], TimedQueue]:
        """Current names and a queue of later {"type","item"} events; see unsubscribe."""

    def unsubscribe(self, q: TimedQueue) -> None: ...

    def ready(self) -> bool:
        """True when the source can list items right now."""

    def settling(self) -> int:
        """How many items were seen but are not listed yet (a folder's files still being
        written); 0 for a source whose writes are atomic."""

    def __len__(self) -> int: ...

    @property
    def version(self) -> int:
        """The listing's version: it grows with every change (`metadata.resourceVersion`)."""


@runtime_checkable
class ServesPrebuilt(Protocol):
    """A source that keeps its listing's JSON array and its watch's first lines built once a
    version, for every request to share (`shared_snapshot.SharedSnapshot`)."""

    def json_names(self) -> tuple[bytes, int]:
        """Every name as a JSON array, and the version."""

    def subscribe_lines(self) -> tuple[bytes, TimedQueue]:
        """As `subscribe`, with the current names as the stream's ADDED lines."""


@runtime_checkable
class ReadsPages(Protocol):
    """A source whose `get` first looks for a newer version (`shared_snapshot.SharedSnapshot`:
    a stat of the publisher's `current`) and then searches its listing for the name: the full
    view reads a page of items' data through one `reader`, which looks once and searches each
    name from the last one's place (the searches were a quarter of a full view's CPU)."""

    def reader(self) -> Callable[[str], dict[str, Any] | None]:
        """`get` over the version current now, for the names of one page, asked in order."""


@runtime_checkable
class HoldsPacked(Protocol):
    """A source that holds its listing as the publisher writes it (`listed.ListedSource`)."""

    def published(self, told: TimedQueue) -> tuple[int, Any, list[dict]]:
        """The version, its listing (a `packed_listing.PackedListing`: a base and a delta),
        and the events `told` (a subscription of the caller's) got up to that version."""


@runtime_checkable
class StreamsEvents(Protocol):
    """A source that hands a watcher its later events alone: the stream pages through the
    listing instead of holding a copy of every name (`subscribe` hands them over)."""

    def subscribe_events(self) -> TimedQueue:
        """A queue of the later {"type","item"} events; see `Source.unsubscribe`."""


@runtime_checkable
class CountsBacklog(Protocol):
    """A source that may know how far it is behind what it reads (a log: the records read and
    not yet served - `ambassador_log_unread_records` and the heartbeat's backlog)."""

    def backlog(self) -> tuple[int, float] | None:
        """(records read and not yet served, the oldest one's age in seconds); None when this
        source has no backlog to tell (it is not a log)."""


@runtime_checkable
class DescribesLog(Protocol):
    """A source that may know the identity of the log it reads, and when it last started
    over (`log_lives.Lives`): a listing's `metadata.log`."""

    def log_facts(self) -> dict | None:
        """The log's identity and its last start over (`Lives.facts`); None when this source
        reads no log, or has not listed it yet."""


@runtime_checkable
class Ranks(Protocol):
    """A source whose items may have priorities (a Redis sorted set's scores, an item data
    field `priority`): the listing carries them (`ItemList.priorities`, the watch's ADDED
    events' `priority`), so a manager orders its line before any item's data is fetched."""

    @property
    def ranks(self) -> bool:
        """Whether any item may have a priority (False: `priorities` is always empty)."""

    def priorities(self, names: list[str] | None) -> dict[str, int]:
        """The priorities of `names` (None: of every item) that are not 0."""


@runtime_checkable
class RanksMetas(Protocol):
    """A lister, or a source type, that reads an item's priority from its meta."""

    def ranks(self, config: dict) -> bool:
        """Whether metas of this configuration carry priorities."""

    def priority(self, meta: str) -> int | None:
        """The priority `meta` carries (None: none)."""
