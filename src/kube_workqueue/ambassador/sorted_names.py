"""A sorted list of item names held as one UTF-8 blob and an array of offsets.

A gunicorn worker serves the listing the publisher wrote (publication.py): NUL-separated, sorted
UTF-8. Held as a `list[str]` plus a `frozenset` for lookups, a name cost a worker about 140
bytes - 140 MB a worker at a million files. Held as the file's own bytes plus one 4-byte offset
per name (8 past 4 GiB), it costs the name's length plus 5 bytes: about 23 bytes. The listed
sources' publisher holds its listing the same way (sources/packed_listing.py), and a list of
metas in step with the names is one too (read by index only: not sorted).

Order: the names are sorted as Python sorts `str` (by code point), and UTF-8 preserves code
point order byte for byte, so every search compares bytes and decodes nothing; only the names
a page returns are decoded.

The full listing's JSON array is built from the blob in one replace when no name needs
escaping in JSON (no `"`, `\\` or control character - the usual case), else by json.dumps.
It is not kept here: the API caches the whole response body once per version.

`names_diff(older, newer)` finds the names added and removed, comparing runs of `_RUN` names as
one bytes comparison, so a re-listing with nothing new is n / _RUN comparisons in C, and each
change costs at most one run stepped through name by name.
"""

from __future__ import annotations

import json
import re
from array import array
from itertools import accumulate, count, repeat
from operator import add

_NEEDS_ESCAPE = re.compile(rb'[\x01-\x1f"\\]')  # NUL is the separator, never in a name
_CHUNK = 1 << 16  # bytes of names split at once when finding where each begins
_RUN = 256  # names compared at once by names_diff
_SHIFTED = 1 << 14  # offsets shifted at once by Joined (a few hundred microseconds)


def starts_of(blob: bytes) -> array:
    """Where each NUL-separated name of `blob` begins, and one past the end (+1 for a NUL):
    4-byte offsets below 4 GiB. Found a chunk of whole names at a time, in C (split, len,
    accumulate): a million names never become a list of a million bytes objects at once."""
    starts = array("I" if len(blob) < 0xFFFFFFFF else "Q", [0])
    position, end = 0, len(blob)
    while position < end:
        cut = blob.find(b"\0", min(position + _CHUNK, end))
        if cut < 0:
            cut = end
        lengths = map(len, blob[position:cut].split(b"\0"))
        # name k of the chunk ends (with its NUL) at position + its length and those before it
        # + k + 1
        starts.extend(map(add, accumulate(lengths), count(position + 1)))
        position = cut + 1
    return starts


class SortedNames:
    def __init__(self, blob: bytes = b"") -> None:
        """`blob`: sorted names, UTF-8, NUL-separated (what the publisher writes)."""
        self.blob = blob
        self._count = blob.count(b"\0") + 1 if blob else 0  # (memchr speed: no offsets yet)
        # Where each name begins, found when first needed: a listing that is only written out
        # (the publisher's, changed by a notification) never pays for them. _starts[i] is where
        # name i begins; _starts[-1] is one past the end (+1 for a NUL). Two threads may both
        # find them: the same array, and either one stands.
        self._found: array | None = None if blob else array("I")

    @property
    def _starts(self) -> array:
        found = self._found
        if found is None:
            found = self._found = starts_of(self.blob)
        return found

    def prepare(self) -> None:
        """Find where each name begins now (a thread that can wait pays for a first lookup)."""
        self._starts  # noqa: B018

    def __len__(self) -> int:
        return self._count

    def raw(self, i: int) -> bytes:
        """Name `i` as stored (UTF-8)."""
        return self.blob[self._starts[i] : self._starts[i + 1] - 1]

    def __getitem__(self, i: int) -> str:
        return self.raw(i).decode("utf-8")

    def span(self, start: int, end: int) -> bytes:
        """Names `start` to `end` (not included) as they are stored: NUL-separated UTF-8."""
        if start >= end:
            return b""
        return self.blob[self._starts[start] : self._starts[end] - 1]

    def slice(self, start: int, end: int) -> list[str]:
        """The names from `start` to `end` (not included), decoded."""
        if start >= end:
            return []
        chunk = self.blob[self._starts[start] : self._starts[end] - 1]
        return chunk.decode("utf-8").split("\0")

    def bisect_right(self, name: str) -> int:
        """How many names sort at or before `name`."""
        key = name.encode("utf-8", "surrogateescape")
        low, high = 0, len(self)
        while low < high:
            mid = (low + high) // 2
            if key < self.raw(mid):
                high = mid
            else:
                low = mid + 1
        return low

    def bisect_left(self, key: bytes, low: int = 0) -> int:
        """How many names sort before the UTF-8 name `key`, given that the first `low` do.
        From `low` it gallops (1, 2, 4, ... names on) before it bisects, so keys looked up in
        order - a delta folded into its base (`PackedListing.merged`) - cost the log of the
        gap since the last one, not of the whole listing: a log's new names, which sort
        together, cost one or two looks each."""
        high, step = len(self), 1
        while low + step - 1 < high:
            probe = low + step - 1
            if self.raw(probe) >= key:
                high = probe
                break
            low, step = probe + 1, step * 2
        while low < high:
            mid = (low + high) // 2
            if self.raw(mid) < key:
                low = mid + 1
            else:
                high = mid
        return low

    def index(self, name: str, low: int = 0) -> int | None:
        """Where `name` is, or None. `low`: names asked in their order pass the place after
        the last one's (a gallop from there, a look or two, not a search of the whole
        listing); a name that does not sort after name `low - 1` is searched from the start."""
        key = name.encode("utf-8", "surrogateescape")
        if low and (low > self._count or self.raw(low - 1) >= key):
            low = 0
        i = self.bisect_left(key, low)
        return i if i < self._count and self.raw(i) == key else None

    def page(self, after: str | None, limit: int | None) -> tuple[list[str], int]:
        """Names strictly after `after` (all when None), at most `limit`, and how many remain
        past them."""
        start = 0 if after is None else self.bisect_right(after)
        end = self._count if limit is None else min(self._count, start + limit)
        return self.slice(start, end), self._count - end

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.index(name) is not None

    def as_set(self) -> frozenset[bytes]:
        """Every name as UTF-8 bytes (for comparing two versions)."""
        return frozenset(self.blob.split(b"\0")) if self.blob else frozenset()

    def added_lines(self) -> bytes:
        """Every name as a watch stream's ADDED event, one JSON line each (as `api.py` writes
        them), built in one replace when no name needs escaping."""
        if not self.blob:
            return b""
        if _NEEDS_ESCAPE.search(self.blob) is None:
            joint = b'"}\n{"type":"ADDED","item":"'
            return b'{"type":"ADDED","item":"' + self.blob.replace(b"\0", joint) + b'"}\n'
        return b"".join(
            json.dumps({"type": "ADDED", "item": n}, ensure_ascii=False,
                       separators=(",", ":")).encode() + b"\n"
            for n in self.slice(0, len(self))
        )  # fmt: skip

    def json_array(self) -> bytes:
        """The names as a JSON array (UTF-8, as `json.dumps(names, ensure_ascii=False)` with
        compact separators gives it)."""
        if not self.blob:
            return b"[]"
        if _NEEDS_ESCAPE.search(self.blob) is None:
            return b'["' + self.blob.replace(b"\0", b'","') + b'"]'
        names = self.slice(0, len(self))
        return json.dumps(names, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def names_diff(older: SortedNames, newer: SortedNames) -> tuple[list[str], list[str]]:
    """(added, removed): the names of `newer` not in `older`, and of `older` not in `newer`,
    each sorted. Both must be sorted (module docstring)."""
    added: list[bytes] = []
    removed: list[bytes] = []
    i = j = 0
    n, m = len(older), len(newer)
    stepping = 0  # names to step through one by one before comparing runs again
    while i < n and j < m:
        if not stepping:
            whole_runs = i + _RUN <= n and j + _RUN <= m
            if whole_runs and older.span(i, i + _RUN) == newer.span(j, j + _RUN):
                i, j = i + _RUN, j + _RUN
                continue
            stepping = _RUN
        stepping -= 1
        a, b = older.raw(i), newer.raw(j)
        if a == b:
            i, j = i + 1, j + 1
        elif a < b:
            removed.append(a)
            i += 1
        else:
            added.append(b)
            j += 1
    removed += (older.raw(k) for k in range(i, n))
    added += (newer.raw(k) for k in range(j, m))
    return [a.decode("utf-8") for a in added], [r.decode("utf-8") for r in removed]


class Joined:
    """A new SortedNames made of runs of `source`'s names and single names between them, in
    order (a delta folded into its base: `PackedListing.merged`) - with where each name
    begins found as it is made when `source`'s are known: a run's offsets are the source's,
    shifted (one C pass), where finding them afresh splits the whole blob again (a million
    names and their metas: 0.2 s of the interpreter at every fold)."""

    def __init__(self, source: SortedNames) -> None:
        self.source = source
        self.parts: list[bytes] = []
        self.at = 0  # where the next part begins
        # Invariant: None, or where each name so far begins, and where the next part does
        self.starts: array | None = (
            array(source._found.typecode, [0]) if source._found is not None else None
        )

    def run(self, start: int, end: int) -> None:
        """The source's names `start` to `end` (not included)."""
        if start >= end:
            return
        part = self.source.span(start, end)
        self.parts.append(part)
        if self.starts is not None:
            old = self.source._starts
            shift = self.at - old[start]
            try:  # a chunk at a time: other threads get the interpreter between chunks
                for first in range(start + 1, end + 1, _SHIFTED):
                    last = min(end + 1, first + _SHIFTED)
                    self.starts.extend(map(add, old[first:last], repeat(shift)))
            except OverflowError:  # past 4 GiB: found afresh when first needed
                self.starts = None
        self.at += len(part) + 1

    def one(self, name: bytes) -> None:
        self.parts.append(name)
        self.at += len(name) + 1
        if self.starts is not None:
            try:
                self.starts.append(self.at)
            except OverflowError:
                self.starts = None

    def names(self) -> SortedNames:
        made = SortedNames(b"\0".join(self.parts))
        if self.starts is not None and made.blob:
            made._found = self.starts
        return made
