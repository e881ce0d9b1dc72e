"""Items are the members of a Redis set or sorted set; their data, optionally, a hash's fields.
(A Redis stream, `?stream=KEY`, is a log, and a source type of its own: `redis_stream.py`.)

    workqueue ambassador --source 'redis://host:6379/0?set=videos&data=video-data'
    workqueue ambassador --source 'redis://host:6379/0?zset=videos'

`set=KEY` names the set whose members are the items, or `zset=KEY` a sorted set whose members
are the items and whose scores their priorities (higher first: `ZADD videos 10 a.mp4`; a score
with a fraction is rounded down, and one beyond ±2^31-1 is 0); one of the two is required.
`data=KEY` names a hash whose field NAME holds item NAME's data - a JSON object is merged into
the item's data (its integer `priority`, if any, is the item's priority in a plain set), any
other value is given as `value`. A priority is carried in the listing (`ItemList.priorities`)
and in the item's data (`priority`); changing a score or a priority is not a new version.

`rediss://` connects with TLS; a password is taken from the URL or, better
(it stays out of process listings and Helm values), from the `REDIS_PASSWORD` environment
variable. A member is an item when it ends with one of `--suffix` (default: any member, as a
set holds names, not files) and can be served as a name (one line of valid UTF-8).

Versions: with a data hash, an item's version is a digest of its data, so writing new data for
a member makes it a new version (`--on-change rerun` runs it again); without one, every member
has the same version for ever.

Changes: where the server has keyspace notifications on for sets (sorted sets) and hashes
(`notify-keyspace-events` holding `K` and `s` (`z`) / `h`, or `A`), a change to the set or
the hash is pushed (`__keyspace@DB__:KEY`) and answered with one re-listing (SSCAN or ZSCAN, and
HSCAN, a thousand at a time) - Redis says which key changed, not which member; several
changes in a burst share one.
Otherwise the set is re-listed every `--poll-interval`. Either way, a full re-listing also runs
every `--relist-interval`: a DEL of the set is notified only with `g` in the flags, and FLUSHALL,
FLUSHDB and a restart of the server notify nothing - the next full listing finds those (and
`--cancel-removed` holds a set that suddenly empties: `manager.runtime.removal_guard`).
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
from collections.abc import Iterable, Iterator
from typing import Any

from ..naming import SkippedNames, normalise_suffixes
from .items import content_type
from .listed import ListedSource
from .listers import RELIST, Change, SourceUnreachable, intervals
from .redis_client import address, connect, key_type
from .registry import SourceConfigError, neither_folder_nor_s3

PRIORITY_LIMIT = 2**31 - 1
SCAN_COUNT = 1000
BURST_SECONDS = 0.05  # notifications this close together share one re-listing


class RedisLister:
    """The `Lister` (listers.py) for one set (and its data hash)."""

    def __init__(self, config: dict) -> None:
        self.config = config
        self.set_key = config["REDIS_SET"]
        self.sorted = bool(config.get("REDIS_SORTED"))
        self.data_key = config.get("REDIS_DATA") or None
        self.suffixes = normalise_suffixes(config["SUFFIXES"]) if config.get("SUFFIXES") else ()
        self.db = int(config.get("REDIS_DB") or 0)
        kind = "sorted set" if self.sorted else "set"
        self.where = f"redis {kind} {self.set_key!r} (db {self.db})"
        self.redis = connect(config)
        self.raw = connect(config, decode=False)  # the scans: bytes, decoded one by one
        self.skipped = SkippedNames(self.where)

    def is_item(self, member: str) -> bool:
        if not member or not self.skipped.check(member):
            return False
        return not self.suffixes or member.lower().endswith(self.suffixes)

    def _decoded(self, raw: bytes) -> str | None:
        """A member's name, or None (skipped: said once, counted) when it is not UTF-8."""
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            self.skipped.skip(raw, "not_utf8")
            return None

    def list_all(self) -> Iterable[tuple[str, str]]:
        import redis

        try:
            raw_scores: dict[bytes, float] = {}
            if self.sorted:
                raw_scores = dict(self.raw.zscan_iter(self.set_key, count=SCAN_COUNT))
                raw_members = list(raw_scores)
            else:
                raw_members = list(self.raw.sscan_iter(self.set_key, count=SCAN_COUNT))
            raw_data: dict[bytes, bytes] = {}
            if self.data_key:
                raw_data = dict(self.raw.hscan_iter(self.data_key, count=SCAN_COUNT))
        except redis.RedisError as exc:
            raise SourceUnreachable(f"{self.where}: {exc}") from None
        members, scores, data = [], {}, {}
        for raw in raw_members:
            name = self._decoded(raw)
            if name is not None:
                members.append(name)
                if self.sorted:
                    scores[name] = raw_scores[raw]
        for key, value in raw_data.items():  # (a value is data: what is not UTF-8 replaced)
            try:
                data[key.decode("utf-8")] = value.decode("utf-8", "replace")
            except UnicodeDecodeError:
                continue  # the data of a member that is no item
        out = []
        for m in members:
            if self.is_item(m):
                meta = json.dumps(data[m]) if m in data else "-"
                if self.sorted:
                    meta = f"p{score_priority(scores[m])}:{meta}"
                out.append((m, meta))
        return out

    def describe(self, name: str, meta: str) -> dict[str, Any]:
        return describe(name, meta, has_data=self.data_key is not None)

    def ranks(self, config: dict) -> bool:
        return ranks(config)

    def priority(self, meta: str) -> int | None:
        return priority_of(meta)

    def changes(self, stop: threading.Event) -> Iterator[list[Change] | object] | None:
        """Keyspace notifications, when the server sends them for sets (and hashes)."""
        import redis

        try:
            flags = (self.redis.config_get("notify-keyspace-events") or {}).get(
                "notify-keyspace-events", ""
            )
        except redis.RedisError:  # CONFIG may be refused (managed Redis): poll
            return None
        kind = "z" if self.sorted else "s"
        wanted = {kind, "h"} if self.data_key else {kind}
        if "K" not in flags or not ("A" in flags or wanted <= set(flags)):
            return None
        channels = [f"__keyspace@{self.db}__:{self.set_key}"]
        if self.data_key:
            channels.append(f"__keyspace@{self.db}__:{self.data_key}")
        pubsub = connect(self.config, timeout=30).pubsub(ignore_subscribe_messages=True)
        try:
            pubsub.subscribe(*channels)  # now, so that no change after start() is missed
        except redis.RedisError:
            pubsub.close()
            return None
        return self._notified(pubsub, stop)

    def _notified(self, pubsub, stop: threading.Event) -> Iterator[object]:
        import redis

        try:
            yield RELIST  # what changed between the first listing and the subscription
            while not stop.is_set():
                message = pubsub.get_message(timeout=1.0)
                if message is None:
                    continue
                stop.wait(BURST_SECONDS)
                while pubsub.get_message(timeout=0) is not None:
                    pass  # the whole burst is one re-listing
                yield RELIST
        except redis.RedisError as exc:
            raise SourceUnreachable(f"{self.where}: notifications: {exc}") from None
        finally:
            pubsub.close()


def score_priority(score: float) -> int:
    """A sorted set's score as a priority (see the module docstring)."""
    if score != score or abs(score) > PRIORITY_LIMIT:  # NaN never comes from Redis; inf may
        return 0
    return math.floor(score)


def split_meta(meta: str) -> tuple[int | None, str]:
    """(a sorted set member's priority or None, the meta of its data)."""
    if meta.startswith("p"):
        number, _, rest = meta[1:].partition(":")
        return int(number), rest
    return None, meta


def ranks(config: dict) -> bool:
    return bool(config.get("REDIS_SORTED") or config.get("REDIS_DATA"))


def priority_of(meta: str) -> int | None:
    """The priority an item's meta carries: its score, or its data's integer `priority`."""
    scored, meta = split_meta(meta)
    if scored is not None:
        return scored
    if "priority" not in meta:  # (the cheap test: most data has none)
        return None
    found = describe("", meta, has_data=True).get("priority")
    if isinstance(found, int) and not isinstance(found, bool) and abs(found) <= PRIORITY_LIMIT:
        return found
    return None


def describe(name: str, meta: str, *, has_data: bool) -> dict[str, Any]:
    scored, meta = split_meta(meta)
    data: dict[str, Any] = {"name": name, "contentType": content_type(name)}
    if meta != "-":
        value = json.loads(meta)
        try:
            parsed = json.loads(value)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            data.update({k: v for k, v in parsed.items() if k not in ("name", "version")})
        else:
            data["value"] = value
        data["version"] = "d-" + hashlib.sha256(value.encode()).hexdigest()[:16]
    elif has_data:
        data["version"] = "d-none"
    else:
        data["version"] = "m-1"  # a set member has no content: one version for ever
    if scored is not None:
        data["priority"] = scored  # (not in the version: a new score is not a new version)
    return data


class RedisType:
    """The Redis source type of the registry (`registry.py`)."""

    kind = "redis"
    extra = "redis"
    secret_variables = "REDIS_PASSWORD"
    events = True  # keyspace notifications, where the server has them on
    content_versions = True  # with a data hash
    data_groups = True  # the data hash's JSON may say its group
    settles = False

    def shown(self, config: dict) -> str:
        kind = "sorted set" if config.get("REDIS_SORTED") else "set"
        return f"redis {kind} {config['REDIS_SET']!r}"  # (never the URL: it may hold a password)

    def ranks(self, config: dict) -> bool:
        return ranks(config)

    def priority(self, meta: str) -> int | None:
        return priority_of(meta)

    def config_from_url(self, url: str, options: dict) -> dict:
        neither_folder_nor_s3("redis", options)
        base, db, query, key = address(url, {"set", "zset", "data"}, ("set", "zset"))
        suffixes = options.get("SUFFIXES") or []
        try:
            normalise_suffixes(suffixes)
        except ValueError as exc:
            raise SourceConfigError(str(exc)) from None
        return {
            "REDIS_URL": base,
            "REDIS_DB": db,
            "REDIS_SET": query[key][0],
            "REDIS_SORTED": key == "zset",
            "REDIS_DATA": (query.get("data") or [""])[0] or None,
            "SUFFIXES": suffixes,
            **intervals(options, 2.0),
        }

    def check(self, config: dict) -> None:
        lister = RedisLister(config)
        kind = key_type(lister.redis, config, lister.where)
        wanted = "zset" if lister.sorted else "set"
        if kind not in (wanted, "none"):
            noun = "a sorted set" if lister.sorted else "a set"
            raise SourceConfigError(f"{lister.where}: the key holds a {kind}, not {noun}")

    def open(self, config: dict) -> ListedSource:
        return ListedSource.configured(RedisLister(config), config, 2.0)

    def describe(self, config: dict, name: str, meta: str | None) -> dict | None:
        if not meta:
            return None
        return describe(name, meta, has_data=bool(config.get("REDIS_DATA")))


SOURCE_TYPE = RedisType()
