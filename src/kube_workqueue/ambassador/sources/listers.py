"""What a listed source asks of its store: the `Lister` port, and what a lister may also be.

A store that is listed (a bucket, a Redis set, a log's records) implements only a `Lister`:
every item's name with a short *meta* (`list_all`), one item's data from its meta
(`describe`), and - where the store reports them - a feed of changes (`changes`, batches of
`Change` or `RELIST`). `listed.ListedSource` does the rest: the listing, its diffs, the
watchers. A lister says what more it is by the protocols below, which the source checks at
run time (`isinstance`): a feed that starts again after it broke (`Resumes`), a count of what
it read and the listing does not carry yet (`HoldsBacklog`), a connection to close when the
source stops (`HoldsConnection`).

A lister raises `SourceUnreachable` for a store that cannot be listed right now: the source
keeps the listing it had (an outage never reads as "every item was removed") and says it is
not ready. `intervals` reads how often a listed source polls and re-lists.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Protocol, runtime_checkable

from .log_records import Backlog

Change = tuple[str, "str | None"]  # (name, meta) - meta None: the item is gone
RELIST = object()  # what a change feed yields for "something changed: list everything again"
# what a change feed yields before it ends because its store is another one now (a log made
# again): list everything, then follow a new feed (`changes`) from what that listing read
RESTART = object()


class SourceUnreachable(Exception):
    """The store could not be listed right now (network, credentials, throttling)."""


class PositionWentBack(SourceUnreachable):
    """A log's positions went back within one identity (`log_records`): the listing is held
    as it was, not served - new records at positions already read could be taken for ones
    that ran. The message says where, and what was read before."""


class ListedShort(SourceUnreachable):
    """A log's listing read fewer records than its server said it holds, again after reading
    it anew: held as it was rather than served short (the message says how many of how
    many)."""


class Lister(Protocol):
    where: str  # "s3://bucket/prefix/", for logs

    def list_all(self) -> dict[str, str] | Iterable[tuple[str, str]]:
        """Every item's name -> meta (a dict, or (name, meta) pairs - best as the store's pages
        come, in name order where the store lists in it); raises SourceUnreachable, also
        while the pairs are being read. The whole listing or an exception: never a part."""

    def describe(self, name: str, meta: str) -> dict[str, Any]:
        """The item's data from its meta."""

    def changes(self, stop: threading.Event) -> Iterator[list[Change] | object] | None:
        """Batches of changes as the store reports them (or RELIST when it says only that
        something changed), until `stop`; None when the store reports none (then it polls)."""


@runtime_checkable
class Resumes(Protocol):
    """A lister whose feed can start again after it broke (a log: from the newest position it
    read) - the source polls until a listing works, then follows a new feed."""

    resumes: bool


@runtime_checkable
class HoldsBacklog(Protocol):
    """A lister that counts what it read and the listing does not carry yet (a log's
    `log_records.Backlog`): the source's `backlog()`."""

    backlog: Backlog


@runtime_checkable
class TellsLog(Protocol):
    """A log's lister that knows the log's identity (`log_lives.Lives`): what a listing's
    `metadata.log` says - the identity, and when the log last started over."""

    def log_facts(self) -> dict | None: ...


@runtime_checkable
class HoldsConnection(Protocol):
    """A lister holding a connection to its store, closed when the source stops."""

    def stop(self) -> None: ...


RELIST_SECONDS = 300.0  # a listed source's full re-listing, unless --relist-interval says


def intervals(given: Mapping[str, Any], poll: float) -> dict[str, float]:
    """A listed source's POLL_INTERVAL and RELIST_INTERVAL: as `given` (the options, or an app
    configuration) says, else `poll` - the source type's own - and RELIST_SECONDS."""
    return {
        "POLL_INTERVAL": float(given.get("POLL_INTERVAL") or poll),
        "RELIST_INTERVAL": float(given.get("RELIST_INTERVAL") or RELIST_SECONDS),
    }
