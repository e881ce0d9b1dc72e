"""A log's records as items: the core every log source shares (Redis Streams, NATS JetStream
and Kafka are a client each over it, `redis_stream.py`, `nats_stream.py`, `kafka_topic.py`).

A log is an ordered sequence of records, each at a *position* (a Redis entry id `1733-0`, a
JetStream sequence, a Kafka `partition:offset`) with *fields* (strings). Two shapes map a log
onto the items API, chosen per source:

    keyed          the record's key - the field `--name`/`?name=FIELD` names - is the item's
                   name; the newest record of a key is the item, its position the item's
                   version; a record whose field `deleted` is `true` (or `1`) is a tombstone:
                   the item is gone. A record read again (a restart, a re-listing) is the same
                   position, so the same version: it never runs twice.
    every record   each record is an item named by its position: nothing is ever replaced;
                   retention trimming the log takes items away.

Delivery is the manager's business, not the log's: a log source never acknowledges or
consumes anything - it reads the retained log (again, after a restart: the log is the durable
position), and the manager's ledger says what ran. So a record redelivered, re-read or read by
two ambassadors is one item at one version, and a record that arrived while the ambassador was
down is listed at its next start.

A name is unique within the log's *identity*. A log made again - a JetStream stream deleted and
added, a Kafka topic recreated or lost with its broker's storage - starts its positions over,
so record 1 of the new log would take the name of record 1 of the old one and be skipped as
done. Each lister reads what identifies the log it reads (`log_lives.LogIdentity`: JetStream's
stream `created` time, Kafka's topic id) and names the items of the every-record shape within it -
`<tag>-<position>`, the tag a short digest of the identity - so a new log's records are new
items, and the old names' successes stay as they are; the versions of both shapes carry the
tag too. When the identity changes under a running lister, it says so once - when, what it
was, and the newest position read of the old log - in its log and in its listings'
`metadata.log`, which the manager shows in `status`. Redis keeps no identity for a stream
(`redis_stream.py` says what it does instead). A position that goes back *within* one identity
(a Kafka partition truncated, a Redis stream made again with ids given by hand) is held: the
listing fails (`listers.PositionWentBack`, kept as it was, `/readyz` says why) rather than take new
records for ones that ran.

An item's *meta* (what the listing keeps of it, `listed.py`) is compact JSON: `{"p": position,
"i": tag, "f": fields}` (no `i` for a log without an identity). Its data is the fields (a
field `name` or `version` is given as `field.name`, `field.version`: those two are the API's),
with `position`, the log's name, `logIdentity` (the tag) and `version` =
`o-<tag>-<position>`; an integer field `priority` is the item's priority, a `group` field its
group (`--group`'s fallback).
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Iterable
from typing import Any

from .items import content_type

log = logging.getLogger(__name__)

TOMBSTONE_FIELD = "deleted"
TOMBSTONE_VALUES = frozenset({"true", "1"})
PRIORITY_LIMIT = 2**31 - 1
RESERVED = ("name", "version")  # the items API's own keys


class LogShape:
    """How records become items (see the module docstring): keyed by `name_field`, or (None)
    every record an item. `check_name(name)` says whether a key can be an item's name (the
    source's `SkippedNames.check`: said once and counted when it cannot). `key_of(fields)`,
    where a client's key is not a field as it stands (a NATS subject less the stream's
    filter), finds the key instead of `fields[name_field]`. `tag`: the identity's of the log
    read now ("" for none), set by the lister before it reads: it names every-record items
    and is in every meta."""

    def __init__(self, name_field: str | None, check_name=lambda name: True,
                 key_of=None) -> None:  # fmt: skip
        self.name_field = name_field
        self.check_name = check_name
        self.key_of = key_of or (lambda fields: fields.get(name_field))
        self.tag = ""
        # keyed: records read that had no key (not a field of theirs), and the first one's
        # field names - what `unnamed` says when a listing found no item at all
        self.unkeyed = 0
        self.first_fields: list[str] | None = None
        self._unnamed_said = False

    @property
    def keyed(self) -> bool:
        return self.name_field is not None

    def name_of(self, position: str) -> str:
        """An every-record item's name: its position, within the log's identity."""
        return f"{self.tag}-{position}" if self.tag else position

    def change(self, position: str, fields: dict[str, str]) -> tuple[str, str | None] | None:
        """The change one record makes: (name, meta) - there now with this meta - or (name,
        None) - a tombstone: gone; None when the record is no item (no key, a key that cannot
        be a name)."""
        if not self.keyed:
            return self.name_of(position), meta_of(position, fields, self.tag)
        name = self.key_of(fields)
        if not name:
            self.unkeyed += 1
            if self.first_fields is None:
                self.first_fields = sorted(fields)
            return None
        if not self.check_name(name):
            return None
        if fields.get(TOMBSTONE_FIELD, "").lower() in TOMBSTONE_VALUES:
            return name, None
        return name, meta_of(position, fields, self.tag)

    def unnamed(self, where: str, found: dict[str, str]) -> None:
        """After a listing that found no item (`found`): when records were read that had no
        key - `?name=` names a field they do not have -, say so once, with the fields the
        first of them has (a mistyped name listed "0 items" without a word)."""
        if found or not self.unkeyed or self._unnamed_said:
            return
        self._unnamed_said = True
        log.warning("%s: %d record(s) have no %r to name an item by, so none is an item (the "
                    "first has: %s) - check name= in the source's URL", where, self.unkeyed,
                    self.name_field, ", ".join(self.first_fields or []) or "no field")  # fmt: skip

    def fold(self, found: dict[str, str], position: str, fields: dict[str, str]) -> None:
        """Apply one record (the next in log order) to `found`, name -> meta."""
        change = self.change(position, fields)
        if change is None:
            return
        name, meta = change
        if meta is None:
            found.pop(name, None)
        else:
            found[name] = meta

    def items(self, records: Iterable[tuple[str, dict[str, str]]]) -> dict[str, str]:
        """name -> meta of every item `records` (in log order) leave: the newest record of a
        key wins, a tombstone takes its key away."""
        found: dict[str, str] = {}
        tag = self.tag
        if not self.keyed:  # every record an item, named by its position: nothing to look up
            name_of = self.name_of
            for position, fields in records:
                found[name_of(position)] = meta_of(position, fields, tag)
            return found
        change_of = self.change
        for position, fields in records:  # (`fold`, inlined: a million records' hot path)
            change = change_of(position, fields)
            if change is None:
                continue
            name, meta = change
            if meta is None:
                found.pop(name, None)
            else:
                found[name] = meta
        return found


class Backlog:
    """What a log source has read from its server but not yet served - the records a change
    feed took and the listing does not carry yet - and, where the server says it, how many
    more the log holds beyond them (a JetStream consumer's `num_pending`): the
    `ambassador_log_unread_records` and `ambassador_log_oldest_unread_age_seconds` metrics.

    Invariant: `_times` holds the record time (seconds since the epoch) of each record read
    and not yet served, oldest first; the feed's thread writes (`read`, `served`), the
    publisher reads (`figures`), under `_lock`."""

    def __init__(self) -> None:
        import threading
        from collections import deque

        self._lock = threading.Lock()
        self._times: deque[float] = deque()
        self._beyond = 0  # records the server holds after the newest one read

    def read(self, times: list[float], beyond: int = 0) -> None:
        """Records were taken from the server (their times, in log order); `beyond`: how many
        the server still holds after them, where it says."""
        with self._lock:
            self._times.extend(times)
            self._beyond = max(0, int(beyond))

    def served(self, count: int) -> None:
        """The oldest `count` records read are in the listing now."""
        with self._lock:
            for _ in range(min(count, len(self._times))):
                self._times.popleft()

    def figures(self, now: float) -> tuple[int, float]:
        """(records unread - read and not served, and beyond - , the oldest one's age in
        seconds: 0 when none)."""
        with self._lock:
            unread = len(self._times) + self._beyond
            age = max(0.0, now - self._times[0]) if self._times else 0.0
        return unread, age


_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def _fields_encoder():
    """`_encode` for a dict of strings, without `JSONEncoder.encode`'s Python steps: the C
    encoder those steps end in, made once (what `encode` makes for each call, with no check
    for cycles - a dict of strings has none). A third of a million-record listing's time went
    to those steps. Python without the C accelerator: `_encode` itself."""
    from json import encoder

    if encoder.c_make_encoder is None or encoder.c_encode_basestring is None:
        return _encode
    encode_one = encoder.c_make_encoder(
        None, _unencodable, encoder.c_encode_basestring, None, ":", ",", False, False, True
    )
    return lambda fields: "".join(encode_one(fields, 0))


def _unencodable(value):
    raise TypeError(f"a record's field is not a string: {type(value).__name__}")


_encode_fields = _fields_encoder()


def _object_decoder():
    """`json.loads` for a text that starts with `{`, without `JSONDecoder.decode`'s Python steps
    (two regular expressions for whitespace, two calls): the scanner those steps end in, made
    once - what a million-record listing paid most for after the broker. Trailing whitespace
    is allowed, as `json.loads` allows it; anything else after the object is a ValueError."""
    from json import scanner

    scan = scanner.make_scanner(json.JSONDecoder())

    def decode(text: str):
        try:
            found, end = scan(text, 0)
        except StopIteration as stop:
            raise json.JSONDecodeError("Expecting value", text, stop.value) from None
        if end != len(text) and text[end:].strip(" \t\n\r"):
            raise json.JSONDecodeError("Extra data", text, end)
        return found

    return decode


_decode_object = _object_decoder()
_ONLY_STR = frozenset((str,))


def name_field(query: dict[str, list[str]]) -> str | None:
    """The shape a log source's URL asks for: `?name=FIELD` keyed by FIELD, no `name` every
    record an item; `ValueError` for an empty `name=` (one of the two was meant, and
    guessing either runs the wrong items)."""
    given = query.get("name")
    if given is None:
        return None
    if len(given) > 1:
        raise ValueError(f"name= is given {len(given)} times: an item is named by one field")
    if not given[0].strip():
        raise ValueError(
            "name= is empty: give the field whose value names an item (&name=FIELD), or leave "
            "it out for every record an item"
        )
    if given[0].endswith("."):  # `header.`, `field.`: a prefix with no field after it
        raise ValueError(f"name={given[0]} names no field: give one after the dot "
                         f"({given[0]}NAME)")  # fmt: skip
    return given[0]


def removals(name_field: str | None) -> str | None:
    """How items leave a log source, for its listing's metadata: "retention" in the
    every-record shape (no record is ever deleted: the log trims its oldest, which is never a
    cancellation), None in the keyed shape (a tombstone deletes: that is a removal)."""
    return "retention" if name_field is None else None


def payload_fields(data: bytes) -> dict[str, str]:
    """The fields of a message's payload (a JetStream message's, a Kafka record's value): a
    JSON object's keys - a value that is not a string given as its JSON - else the payload as
    `body` (UTF-8) or `body.base64`; none for an empty payload. The client adds its own fields
    (headers, a subject, a record's key) after these. (A listing's hot path: a million
    records' - the text decoded once, a dict of strings returned as it came.)"""
    if data[:1] == b"{":
        try:
            found = _decode_object(data.decode("utf-8"))
        except ValueError:  # (UnicodeDecodeError included: then it is bytes, `body.base64`)
            found = None
        if isinstance(found, dict):
            if _ONLY_STR.issuperset(map(type, found.values())):  # (all strings: in C)
                return found
            return {key: value if isinstance(value, str) else json.dumps(value)
                    for key, value in found.items()}  # fmt: skip
    fields: dict[str, str] = {}
    if data:
        try:
            fields["body"] = data.decode("utf-8")
        except UnicodeDecodeError:
            fields["body.base64"] = base64.b64encode(data).decode("ascii")
    return fields


def meta_of(position: str, fields: dict[str, str], tag: str = "") -> str:
    """`{"p": position, "i": tag, "f": fields}` (no `i` without a tag), written as one string.
    The listing's hot path: a position (a Kafka partition and offset, a stream id, a sequence)
    and a tag are digits, letters and dashes a JSON string holds as they are, and the fields -
    a dict of strings - go straight to the C encoder (`_encode_fields`)."""
    identity = f'"i":"{tag}",' if tag else ""
    if '"' in position or "\\" in position:  # (no source's, but a meta must stay JSON)
        return f'{{"p":{_encode(position)},{identity}"f":{_encode_fields(fields)}}}'
    return f'{{"p":"{position}",{identity}"f":{_encode_fields(fields)}}}'


def describe(name: str, meta: str, log: str) -> dict[str, Any]:
    """An item's data from its meta (see the module docstring)."""
    found = json.loads(meta)
    data: dict[str, Any] = {"name": name, "contentType": content_type(name)}
    for key, value in found["f"].items():
        data[f"field.{key}" if key in RESERVED else key] = value
    priority = priority_of_fields(found["f"])
    if priority is not None:
        data["priority"] = priority
    elif "priority" in data:
        data["field.priority"] = data.pop("priority")  # not an integer: not a priority
    tag = found.get("i")
    data.update({"position": found["p"], "log": log,
                 "version": f"o-{tag}-{found['p']}" if tag else f"o-{found['p']}"})  # fmt: skip
    if tag:
        data["logIdentity"] = tag
    return data


def priority_of_fields(fields: dict[str, str]) -> int | None:
    text = fields.get("priority")
    if text is None:
        return None
    try:
        value = int(text.strip())
    except ValueError:
        return None
    return value if abs(value) <= PRIORITY_LIMIT else None


def priority_of(meta: str) -> int | None:
    """The priority an item's meta carries (its integer `priority` field), or None."""
    if '"priority"' not in meta:  # (the cheap test: most records have none)
        return None
    return priority_of_fields(json.loads(meta)["f"])
