"""Items are the records of a Redis stream: every record an item, or keyed by one of its fields.

    workqueue ambassador --source 'redis://host:6379/0?stream=renders'              every record
    workqueue ambassador --source 'redis://host:6379/0?stream=renders&name=file'    keyed

The shapes, versions, tombstones and data are the log core's (`log_records.py`): with
`name=FIELD` the newest record of each FIELD value is the item (`XADD renders * file a.mp4
width 320`; `XADD renders * file a.mp4 deleted true` takes it away); without it, each record
is an item named by its entry id (`1733250000000-0`). An item's version is its record's id.

Reading: a full listing is `XRANGE` over the retained stream, a thousand records a call;
changes are `XREAD BLOCK` from the last id read - a push, no polling - applied as they come,
and a full re-listing still runs every `--relist-interval` (a trim, an `XDEL` or a deleted
stream are found by it). The ambassador never joins a consumer group and never acknowledges:
the stream is read, not consumed (what ran is the manager's ledger's), so a restart reads the
retained stream again and misses nothing still retained.

Trimming (`MAXLEN`, `XTRIM`) takes the records it drops out of the listing: to the manager that
is an item that left its source - with `--cancel-removed`, a record trimmed before it ran is
cancelled. Keep the retention longer than the backlog, or do not cancel removals.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

from ..naming import SkippedNames, normalise_suffixes
from .listed import ListedSource
from .listers import Change, SourceUnreachable, intervals
from .log_records import Backlog, LogShape, describe, name_field, priority_of, removals
from .redis_client import address, connect, key_type
from .registry import FOLDER_ONLY, SourceConfigError, not_for

PAGE = 1000  # records an XRANGE or XREAD call returns at most
BLOCK_MS = 1000  # how long an XREAD waits for a record before it looks at `stop`


class StreamLister:
    """The `Lister` (listers.py) for one stream."""

    resumes = True  # the feed starts again after an outage (`changes` from `read_to`)

    def __init__(self, config: dict) -> None:
        self.config = config
        self.key = config["REDIS_STREAM"]
        self.db = int(config.get("REDIS_DB") or 0)
        self.where = f"redis stream {self.key!r} (db {self.db})"
        self.skipped = SkippedNames(self.where)
        self.shape = LogShape(config.get("REDIS_NAME_FIELD") or None, self.skipped.check)
        self.redis = connect(config)
        self.backlog = Backlog()
        self.read_to = "0-0"  # the newest id a listing or the feed read: the feed's start

    def _records(self, client, start: str):
        """(id, fields) of the records from `start` (exclusive: "(id") on, a page at a time."""
        while True:
            page = client.xrange(self.key, min=start, max="+", count=PAGE)
            yield from page
            if len(page) < PAGE:
                return
            start = "(" + page[-1][0]

    def list_all(self) -> dict[str, str]:
        """Every item of the retained stream, folded as the records come (a million records
        are never all held: only the items they leave)."""
        import redis

        last = ["0-0"]

        def records():
            for position, fields in self._records(self.redis, "-"):
                last[0] = position
                yield position, fields

        try:
            items = self.shape.items(records())
        except redis.RedisError as exc:
            raise SourceUnreachable(f"{self.where}: {exc}") from None
        self.read_to = newest(self.read_to, last[0])
        return items

    def describe(self, name: str, meta: str) -> dict[str, Any]:
        return describe(name, meta, self.key)

    def ranks(self, config: dict) -> bool:
        return True  # a record may carry an integer `priority` field

    def priority(self, meta: str) -> int | None:
        return priority_of(meta)

    def changes(self, stop: threading.Event) -> Iterator[list[Change] | object]:
        """The records added after the first listing, as `XREAD BLOCK` reads them."""
        client = connect(self.config, timeout=BLOCK_MS / 1000 + 10)
        return self._follow(client, stop)

    def _follow(self, client, stop: threading.Event) -> Iterator[list[Change] | object]:
        import redis

        last = self.read_to
        try:
            while not stop.is_set():
                found = client.xread({self.key: last}, count=PAGE, block=BLOCK_MS)
                if not found:
                    continue
                records = found[0][1]
                self.backlog.read([int(p.split("-")[0]) / 1000 for p, _ in records])
                batch = []
                for position, fields in records:
                    last = position
                    change = self.shape.change(position, fields)
                    if change is not None:
                        batch.append(change)
                self.read_to = newest(self.read_to, last)
                if batch:
                    yield batch
                self.backlog.served(len(records))
        except redis.RedisError as exc:
            raise SourceUnreachable(f"{self.where}: reading new records: {exc}") from None
        finally:
            client.close()


def newest(a: str, b: str) -> str:
    """The later of two entry ids."""
    return max(a, b, key=lambda p: tuple(int(n) for n in p.split("-")))


def check(config: dict) -> None:
    """The stream is there (a stream, and not something else), and the server answers."""
    lister = StreamLister(config)
    kind = key_type(lister.redis, config, lister.where)
    if kind == "none":
        raise SourceConfigError(
            f"{lister.where}: no such stream (XADD {lister.key} * ... makes it)"
        )
    if kind != "stream":
        raise SourceConfigError(f"{lister.where}: the key holds a {kind}, not a stream")


class RedisStreamType:
    """The Redis stream source type of the registry (`registry.py`): a `redis://` or
    `rediss://` URL whose query names a `stream`."""

    kind = "redis-stream"
    extra = "redis"
    secret_variables = "REDIS_PASSWORD"
    events = True  # XREAD BLOCK: records pushed as they are added
    content_versions = True  # an item's version is its record's id
    data_groups = True  # the record's fields may say its group
    settles = False

    def shown(self, config: dict) -> str:
        return f"redis stream {config['REDIS_STREAM']!r}"  # (never the URL: it may hold one)

    def ranks(self, config: dict) -> bool:
        return True  # a record's `priority` field

    def priority(self, meta: str) -> int | None:
        return priority_of(meta)

    def config_from_url(self, url: str, options: dict) -> dict:
        not_for("redis", options, FOLDER_ONLY)
        base, db, query, _ = address(url, {"stream", "name"}, ("stream",))
        try:
            normalise_suffixes(options.get("SUFFIXES") or [])  # (given, it must still be one)
        except ValueError as exc:
            raise SourceConfigError(str(exc)) from None
        try:
            keyed_by = name_field(query)
        except ValueError as exc:
            raise SourceConfigError(f"{exc}: {url!r}") from None
        return {
            "REDIS_URL": base,
            "REDIS_DB": db,
            "REDIS_STREAM": query["stream"][0],
            "REDIS_NAME_FIELD": keyed_by,
            "REMOVALS": removals(keyed_by),
            "SUFFIXES": [],  # (a record is an item whatever its name ends with)
            **intervals(options, 2.0),
        }

    def check(self, config: dict) -> None:
        check(config)

    def open(self, config: dict) -> ListedSource:
        return ListedSource.configured(StreamLister(config), config, 2.0)

    def describe(self, config: dict, name: str, meta: str | None) -> dict | None:
        return describe(name, meta, config["REDIS_STREAM"]) if meta else None


SOURCE_TYPE = RedisStreamType()
