"""A listed source's delta as the publisher writes it and a worker reads it - whole, or as the
changes of one version.

A listing is a base and a delta over it (`packed_listing.py`): each name whose standing differs
from the base's, with its meta now (None: not listed) and whether the base lists it. Written
out, an entry is three NUL-separated UTF-8 fields - the name, a sign, the meta (empty when
gone) - and entries follow each other the same way (no name or meta holds a NUL):

    +   listed now, not in the base            ~   listed in the base, another meta now
    -   in the base, not listed now            =   as the base says (only in changes: the
                                                   name left the delta)

Whole, a delta costs its size: beside a million log records it grows to 15,600 entries (1.4 MB)
before it is folded into a new base, and writing it whole with every version, and parsing it
in every worker, took a fifth of the publisher's time and a quarter of a worker's at 1,000
records a second - records that came as the delta was largest waited for it. So the
publisher writes it whole only now and then, and each version as its *changes* over the
version before (`changes`), which cost what changed; a worker applies them to the delta it
holds (`applied`).
"""

from __future__ import annotations

from collections.abc import Mapping

Entry = tuple[str | None, bool]  # (its meta now, or None: not listed; whether the base lists it)
AS_BASE = "="


def encode(entries: Mapping[str, Entry | None], order: list[str] | None = None) -> bytes:
    """`entries` written out, in `order` (sorted when None); an entry of None is `=`."""
    parts: list[str] = []
    for name in sorted(entries) if order is None else order:
        entry = entries[name]
        if entry is None:
            parts += (name, AS_BASE, "")
            continue
        meta, in_base = entry
        parts += (name, "-" if meta is None else ("~" if in_base else "+"), meta or "")
    return "\0".join(parts).encode("utf-8", "surrogateescape")


def decode(blob: bytes) -> dict[str, Entry | None]:
    """The entries `blob` holds (None for `=`). Raises ValueError on a blob that is not one
    (a torn file)."""
    if not blob:
        return {}
    fields = blob.decode("utf-8", "surrogateescape").split("\0")
    if len(fields) % 3:
        raise ValueError("a delta is triples of name, change and meta")
    entries: dict[str, Entry | None] = {}
    for k in range(0, len(fields), 3):
        name, sign, meta = fields[k], fields[k + 1], fields[k + 2]
        if sign == "+":
            entries[name] = (meta, False)
        elif sign == "~":
            entries[name] = (meta, True)
        elif sign == "-":
            entries[name] = (None, True)
        elif sign == AS_BASE:
            entries[name] = None
        else:
            raise ValueError(f"not a change: {sign!r}")
    return entries


def changes(before: Mapping[str, Entry], after: Mapping[str, Entry]) -> dict[str, Entry | None]:
    """What takes the delta `before` to `after` (over one base): each entry of `after` that is
    not `before`'s, and None for each name `after` no longer holds. A listing's next delta is
    a copy of its last with the changed entries replaced, so an entry not changed is the same
    object in both, found by identity before equality is asked."""
    out: dict[str, Entry | None] = {}
    new = 0
    for name, entry in after.items():
        was = before.get(name)
        if was is not entry and was != entry:
            out[name] = entry
            new += was is None
    if len(before) > len(after) - new:  # some of `before`'s names are not in `after`
        for name in before.keys() - after.keys():
            out[name] = None
    return out


def effect(entry: Entry | None) -> int:
    """What an entry adds to the base's count of names: +1 new, -1 gone, 0 otherwise."""
    if entry is None:
        return 0
    meta, in_base = entry
    return -1 if meta is None else (0 if in_base else 1)


def applied(delta: Mapping[str, Entry], listed: int, blob: bytes) -> tuple[dict[str, Entry], int]:
    """The delta `delta` (`listed` names in all) with the changes `blob` holds applied, and the
    count after them."""
    fresh = dict(delta)
    for name, entry in decode(blob).items():
        listed += effect(entry) - effect(fresh.get(name))
        if entry is None:
            fresh.pop(name, None)
        else:
            fresh[name] = entry
    return fresh, listed
