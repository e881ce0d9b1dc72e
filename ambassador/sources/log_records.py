"""A log's records as items: the core every log source shares (Redis Streams today; NATS
JetStream and Kafka are a client each over it: docs/architecture.md).

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

An item's *meta* (what the listing keeps of it, `listed.py`) is compact JSON: `{"p": position,
"f": fields}`. Its data is the fields (a field `name` or `version` is given as `field.name`,
`field.version`: those two are the API's), with `position`, the log's name, and
`version` = `o-<position>`; an integer field `priority` is the item's priority, a `group`
field its group (`--group`'s fallback).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from .items import content_type

TOMBSTONE_FIELD = "deleted"
TOMBSTONE_VALUES = frozenset({"true", "1"})
PRIORITY_LIMIT = 2**31 - 1
RESERVED = ("name", "version")  # the items API's own keys


class LogShape:
    """How records become items (see the module docstring): keyed by `name_field`, or (None)
    every record an item. `check_name(name)` says whether a key can be an item's name (the
    source's `SkippedNames.check`: said once and counted when it cannot)."""

    def __init__(self, name_field: str | None, check_name=lambda name: True) -> None:
        self.name_field = name_field
        self.check_name = check_name

    @property
    def keyed(self) -> bool:
        return self.name_field is not None

    def change(self, position: str, fields: dict[str, str]) -> tuple[str, str | None] | None:
        """The change one record makes: (name, meta) - there now with this meta - or (name,
        None) - a tombstone: gone; None when the record is no item (no key, a key that cannot
        be a name)."""
        if not self.keyed:
            return position, meta_of(position, fields)
        name = fields.get(self.name_field)
        if not name or not self.check_name(name):
            return None
        if fields.get(TOMBSTONE_FIELD, "").lower() in TOMBSTONE_VALUES:
            return name, None
        return name, meta_of(position, fields)

    def items(self, records: Iterable[tuple[str, dict[str, str]]]) -> dict[str, str]:
        """name -> meta of every item `records` (in log order) leave: the newest record of a
        key wins, a tombstone takes its key away."""
        found: dict[str, str] = {}
        for position, fields in records:
            change = self.change(position, fields)
            if change is None:
                continue
            name, meta = change
            if meta is None:
                found.pop(name, None)
            else:
                found[name] = meta
        return found


_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def meta_of(position: str, fields: dict[str, str]) -> str:
    """`{"p": position, "f": fields}`, written as one string (a position is digits and
    punctuation a JSON string holds as it is: the listing's hot path encodes the fields only)."""
    return f'{{"p":{_encode(position)},"f":{_encode(fields)}}}'


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
    data.update({"position": found["p"], "log": log, "version": f"o-{found['p']}"})
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
