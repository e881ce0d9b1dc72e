"""A listed source's items - sorted names and each one's meta - packed as two blobs.

The listed sources (listed.py: a bucket, a Redis set) used to keep a listing as Python objects:
each name a `str` in a set and a sorted list, each meta a `str` in a dict - about 240 bytes an
item in the process that lists, plus what parsing the store's pages left on the allocator's
high-water mark among them. Here a listing is what the publisher writes and the workers read
(ambassador/publication.py): the names sorted, NUL-separated UTF-8 with a 4-byte offset each
(`SortedNames`), and the metas in step, the same way - about the bytes themselves plus 8, and
no small objects that outlive a listing.

A listing never changes once built: a new listing, or a listing with some changes applied, is a
new object, and the source swaps it in. So readers take the current one and read it without a
lock, and every structure here is built in a few passes in C (joins, splits, slices):

  * `build(pairs)` takes (name, meta) pairs as a store lists them - S3 lists keys in UTF-8
    binary order, which is this order, so the blobs are written as the pages come; pairs out of
    order (a Redis set's scan) are sorted once at the end;
  * `with_changes(changes)` applies a few changes (notifications) in O(k log n) lookups and one
    copy of the spans between them, and says which names came and went; where each name begins
    is found again only when the new listing is first read by name (the publisher only writes
    it out: 10 changes among a million objects cost a copy, 65 ms, where finding the offsets
    again too took 330 ms);
  * `names_diff(older, newer)` finds the names added and removed, comparing runs of
    `_RUN` names as one bytes comparison, so a re-listing with nothing new is n / _RUN
    comparisons in C, and each change costs at most one run stepped through name by name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..sorted_names import SortedNames

_RUN = 256  # names compared at once by names_diff


class PackedListing:
    __slots__ = ("names", "metas")

    def __init__(self, names: SortedNames | None = None, metas: SortedNames | None = None):
        # Invariant: `names` sorted, no name twice; metas[i] is the meta of names[i].
        self.names = names or SortedNames()
        self.metas = metas or SortedNames()

    @classmethod
    def build(cls, pairs: Iterable[tuple[str, str]]) -> PackedListing:
        """The listing of (name, meta) pairs; a name listed twice keeps its last meta."""
        names, metas = bytearray(), bytearray()
        last, ordered, count = b"", True, 0
        for name, meta in pairs:
            key = name.encode("utf-8", "surrogateescape")
            if count and key <= last:
                ordered = False
            names += key
            names += b"\0"
            metas += meta.encode("utf-8", "surrogateescape")
            metas += b"\0"
            last, count = key, count + 1
        if not count:
            return cls()
        del names[-1:], metas[-1:]  # no NUL after the last
        if not ordered:
            return cls._sorted(bytes(names), bytes(metas))
        return cls(SortedNames(bytes(names)), SortedNames(bytes(metas)))

    @classmethod
    def _sorted(cls, names: bytes, metas: bytes) -> PackedListing:
        by_name = dict(zip(names.split(b"\0"), metas.split(b"\0"), strict=True))  # last wins
        order = sorted(by_name)
        return cls(
            SortedNames(b"\0".join(order)), SortedNames(b"\0".join(by_name[n] for n in order))
        )

    # -- reading ---------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.names)

    def __contains__(self, name: object) -> bool:
        return name in self.names

    def meta(self, name: str) -> str | None:
        """The meta of `name`, or None when it is not listed."""
        i = self.names.index(name)
        return None if i is None else self.metas[i]

    def page(self, after: str | None, limit: int | None) -> tuple[list[str], int]:
        """Names strictly after `after` (all when None), at most `limit`, and how many remain."""
        return self.names.page(after, limit)

    def same_as(self, other: PackedListing) -> bool:
        return self.names.blob == other.names.blob and self.metas.blob == other.metas.blob

    # -- changing (a new listing each time) ------------------------------------------------

    def with_changes(
        self, changes: Mapping[str, str | None]
    ) -> tuple[PackedListing, list[str], list[str]]:
        """This listing with each change applied (name -> its meta now, or None when gone), and
        the names that came and went (sorted). The caller's duty: few changes - each is a
        lookup in this listing, and the new one is a copy of it (one join, in C)."""
        names, metas = self.names, self.metas
        name_parts: list[bytes] = []
        meta_parts: list[bytes] = []
        added: list[str] = []
        removed: list[str] = []
        done = 0  # names[:done] are accounted for
        for key, name, meta in sorted((n.encode("utf-8", "surrogateescape"), n, m)
                                      for n, m in changes.items()):  # fmt: skip
            i = names.bisect_left(key)
            if i > done:  # the names between two changes, copied as one span
                name_parts.append(names.span(done, i))
                meta_parts.append(metas.span(done, i))
            present = i < len(names) and names.raw(i) == key
            done = i + 1 if present else i
            if meta is not None:
                name_parts.append(key)
                meta_parts.append(meta.encode("utf-8", "surrogateescape"))
                if not present:
                    added.append(name)
            elif present:
                removed.append(name)
        if done < len(names):
            name_parts.append(names.span(done, len(names)))
            meta_parts.append(metas.span(done, len(names)))
        if not name_parts:
            return PackedListing(), added, removed
        fresh = PackedListing(SortedNames(b"\0".join(name_parts)),
                              SortedNames(b"\0".join(meta_parts)))  # fmt: skip
        return fresh, added, removed


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
