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

Identity: Redis keeps none for a stream - no creation time, no id - so names carry no tag
(`log_records`). What it does give serves instead: an id made by the server (`XADD key *`,
the usual way) is its clock in milliseconds and a counter, so a stream deleted and made again
goes on past every id the old one had - its records are new names, and run. A listing reads
`XINFO STREAM` first: when its count of entries ever added (`entries-added`, Redis 7) goes
back, the stream was made again, and the lister says so once (`metadata.log.startedOver`);
when the new stream's ids go back to or below the newest one read (ids given by hand, `XADD
key 1-1`, or the server's clock stepped back), they could be names that ran, and the listing
is held (`PositionWentBack`) - until the ambassador is restarted, which cannot tell such a
stream from the old one. The limit, then: a stream made again with ids by hand while no
ambassador ran. Each listing is held to the stream's newest id at its start: a listing that
ends before it while that record is still there is read again, then held (`ListedShort`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

from ..naming import SkippedNames, normalise_suffixes
from .listed import ListedSource
from .listers import RESTART, Change, ListedShort, PositionWentBack, SourceUnreachable, intervals
from .log_lives import Lives
from .log_records import Backlog, LogShape, describe, name_field, priority_of, removals
from .redis_client import address, connect, key_type
from .registry import SourceConfigError, neither_folder_nor_s3

PAGE = 1000  # records an XRANGE or XREAD call returns at most
IDENTITY_LOOK_SECONDS = 2.0  # the feed looks at whether the stream was made again this often
READS = 3  # a listing short of the stream's newest id is read this many times before it is held
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
        self.lives = Lives(self.where)
        self.read_to = "0-0"  # the newest id a listing or the feed read: the feed's start
        self.listed_to = "0-0"  # the newest id the last listing read (of the stream's last life)
        # the stream's `entries-added` at the last listing, and each record the feed read since
        # added to it: what a stream made again (its count starting over) comes in under
        self.seen_added: int | None = None

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
        are never all held: only the items they leave), held to the stream's newest id at its
        start, and looked at for whether it was made again (see the module docstring)."""
        import redis

        try:
            info = self._info(self.redis)
            if (
                info is not None
                and self.read_to != "0-0"
                and before(info.get("last-generated-id") or "0-0", self.read_to)
            ):
                raise self._went_back(info["last-generated-id"])
            end = (info.get("last-entry") or (None,))[0] if info else None
            for _ in range(READS):
                last, fresh = ["0-0"], [0]
                items = self.shape.items(self._noting(last, fresh))
                if (
                    end is None
                    or not before(last[0], end)
                    or not self.redis.xrange(self.key, min=end, max=end)
                ):  # (reached the end it had, or that record is gone: trimmed meanwhile)
                    break
            else:
                raise ListedShort(f"{self.where}: read up to {last[0]}, short of {end} in "
                                  f"the stream, {READS} times: held, not served short")  # fmt: skip
        except redis.RedisError as exc:
            raise SourceUnreachable(f"{self.where}: {exc}") from None
        added = info.get("entries-added") if info else None
        if added is not None:
            if self.seen_added is not None and added < self.seen_added + fresh[0]:
                first = (info.get("first-entry") or ("0-0",))[0]
                if self.listed_to != "0-0" and not before(self.listed_to, first):
                    raise self._went_back(first)  # made again with ids it had: held
                self.lives.made_again(f"it holds {added:,} record(s) ever added, fewer than "
                                      "were read of it", self.listed_to)  # fmt: skip
            self.seen_added = added
        self.read_to = newest(self.read_to, last[0])
        self.listed_to = last[0] if last[0] != "0-0" else self.listed_to
        self.shape.unnamed(self.where, items)
        return items

    def _info(self, client) -> dict | None:
        """`XINFO STREAM` of the key, or None for no stream (listed as empty, as XRANGE
        lists it)."""
        import redis

        try:
            return client.xinfo_stream(self.key)
        except redis.ResponseError:
            return None

    def _went_back(self, to: str) -> PositionWentBack:
        return PositionWentBack(
            f"{self.where}: its ids go back to {to}, at or below ones already read "
            "(made again with ids given by hand?) - held, so that no new record is taken for "
            "one that ran (restart the ambassador to serve it as it is, or give the stream a "
            "new key)"
        )

    def _noting(self, last: list[str], fresh: list[int]):
        """The retained records; `last[0]` told the id of each as it goes, `fresh[0]` how
        many come after `read_to` (records no listing or feed read before)."""
        read_to = _id(self.read_to)
        for position, fields in self._records(self.redis, "-"):
            last[0] = position
            if _id(position) > read_to:
                fresh[0] += 1
            yield position, fields

    def log_facts(self) -> dict | None:
        return self.lives.facts()

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

        last, looked = self.read_to, time.monotonic()
        try:
            while not stop.is_set():
                if time.monotonic() - looked > IDENTITY_LOOK_SECONDS:
                    looked = time.monotonic()
                    if self._made_again(client):
                        yield RESTART  # the listing says so, or holds it (module docstring)
                        return
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
                if self.seen_added is not None:
                    self.seen_added += len(records)
                if batch:
                    yield batch
                self.backlog.served(len(records))
        except redis.RedisError as exc:
            raise SourceUnreachable(f"{self.where}: reading new records: {exc}") from None
        finally:
            client.close()

    def _made_again(self, client) -> bool:
        """Whether the stream holds fewer records ever added than were read of it (it was
        deleted and made again)."""
        info = self._info(client)
        added = info.get("entries-added") if info else None  # (gone: the next record makes it)
        return added is not None and self.seen_added is not None and added < self.seen_added


def _id(position: str) -> tuple[int, ...]:
    return tuple(int(n) for n in position.split("-"))


def newest(a: str, b: str) -> str:
    """The later of two entry ids."""
    return max(a, b, key=_id)


def before(a: str, b: str) -> bool:
    """Whether entry id `a` comes before `b`."""
    return _id(a) < _id(b)


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
        neither_folder_nor_s3("redis", options)
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
