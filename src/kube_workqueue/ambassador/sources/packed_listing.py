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
  * a listing is a *base* (the two blobs) and a small *delta* over it: each name whose meta
    changed, came or went since the base was made. `with_changes(changes)` costs a lookup a
    change and a copy of the delta - the base is shared, never copied - and says which names
    came and went. A change feed beside a million items used to copy both blobs at every
    batch (65-75 ms) and find where each name begins in the copy at its first lookup
    (200-330 ms): a log's records waited 0.4-0.6 s for it at 1,000 a second;
  * `merged()` folds the delta into a new base (the base's spans between changed names, one
    join); the source does it in a thread of its own once the delta outgrows MERGE_AT names
    and 1/MERGE_SHARE of the base, finds the new base's offsets there too (`prepared`), and
    swaps in `rebased` - the changes made meanwhile, over the new base. A page reads the base
    and the sorted delta side by side; a whole listing (the publisher's blobs, a watch's first
    names) is the merge, kept with the listing;
  * a listing over a base made by folding (`rebased`) remembers the delta folded, so the
    publisher can go on writing versions over the base before while it writes the new one
    (`delta_over`); comparing two listings over different bases: `sorted_names.names_diff`.
"""

from __future__ import annotations

import itertools
from bisect import bisect_right
from collections.abc import Callable, Iterable, Mapping
from itertools import accumulate

from ..sorted_names import Joined, SortedNames, names_diff
from . import delta_format
from .delta_format import Entry, effect

MERGE_AT = 1024  # a delta of more names than this and MERGE_SHARE of the base is merged
MERGE_SHARE = 64
_bases = itertools.count(1)  # each base's number (`_generation`)


class PackedListing:
    __slots__ = ("_names", "_metas", "_delta", "_count", "_order", "_merged", "_generation",
                 "_folded")  # fmt: skip

    def __init__(self, names: SortedNames | None = None, metas: SortedNames | None = None):
        # The base: `_names` sorted, no name twice; _metas[i] is the meta of _names[i].
        self._names = names or SortedNames()
        self._metas = metas or SortedNames()
        # Invariant: listings share `_generation` exactly when they share the base; `_folded`
        # is (the generation folded, the delta folded over it) when the base was made by
        # folding a delta (`rebased`), else None - so the publisher can go on writing a
        # version's delta over the base before, while it writes this one (`delta_over`).
        self._generation = next(_bases)
        self._folded: tuple[int, dict[str, tuple[str | None, bool]]] | None = None
        # Invariant: `_delta` holds each name whose standing differs from the base's - name ->
        # (its meta now, or None: not listed; whether the base lists it) - so a name with None
        # is always one the base lists; `_count` is how many names are listed in all.
        self._delta: dict[str, tuple[str | None, bool]] = {}
        self._count = len(self._names)
        self._order: tuple[list[str], list[int]] | None = None  # (module docstring)
        self._merged: PackedListing | None = None

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
        return self._count

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.meta(name) is not None

    def meta(self, name: str) -> str | None:
        """The meta of `name`, or None when it is not listed."""
        changed = self._delta.get(name)
        if changed is not None:
            return changed[0]
        return self._base_meta(name)

    def _base_meta(self, name: str) -> str | None:
        return self._base_meta_from(name, 0)[0]

    def _base_meta_from(self, name: str, low: int) -> tuple[str | None, int]:
        """The base's meta of `name` (None: not in the base), its search begun at `low`
        (`SortedNames.index`), and where the next name in order may begin its own."""
        i = self._names.index(name, low)
        if i is None:
            return None, low
        return (self._metas[i] if len(self._metas) else ""), i + 1  # ("": published without)

    def metas_in_order(self) -> Callable[[str], str | None]:
        """`meta`, for names asked in their order (a page's): each search of the base starts
        at the last name's place, so a page's next name costs a look, not a search (the
        search was a quarter of a full view's CPU). Any order is still answered right."""
        place = 0

        def meta(name: str) -> str | None:
            nonlocal place
            changed = self._delta.get(name)
            if changed is not None:
                return changed[0]
            found, place = self._base_meta_from(name, place)
            return found

        return meta

    def page(self, after: str | None, limit: int | None) -> tuple[list[str], int]:
        """Names strictly after `after` (all when None), at most `limit`, and how many remain."""
        if not self._delta:
            return self._names.page(after, limit)
        if limit is None:  # every name: the merged blobs, sliced in C
            return self.merged().page(after, None)
        names, effects = self._sorted_delta()
        first = 0 if after is None else bisect_right(names, after)
        base_first = 0 if after is None else self._names.bisect_right(after)
        listed_after = (len(self._names) - base_first) + (effects[-1] - effects[first])
        out: list[str] = []
        base_at, delta_at, base_end = base_first, first, len(self._names)
        while len(out) < limit:  # the base's names a chunk at a time, the delta's among them
            chunk = self._names.slice(base_at, min(base_end, base_at + limit - len(out) + 16))
            base_at += len(chunk)
            for name in chunk:
                while delta_at < len(names) and names[delta_at] < name:
                    delta_at = self._take_delta(names[delta_at], delta_at, out)
                if name in self._delta:  # changed or gone: the delta's entry says which
                    if delta_at < len(names) and names[delta_at] == name:
                        delta_at = self._take_delta(name, delta_at, out)
                    continue
                out.append(name)
            if base_at >= base_end:  # the base is read out: the delta's last new names
                while delta_at < len(names):
                    delta_at = self._take_delta(names[delta_at], delta_at, out)
                break
        del out[limit:]
        return out, listed_after - len(out)

    def _take_delta(self, name: str, at: int, out: list[str]) -> int:
        if self._delta[name][0] is not None:
            out.append(name)
        return at + 1

    def _sorted_delta(self) -> tuple[list[str], list[int]]:
        """The changed names sorted, and how many names each prefix of them adds to the
        base's count (effects[k]: the first k; a new name +1, a gone one -1, a changed one 0)."""
        order = self._order
        if order is None:
            names = sorted(self._delta)
            steps = (effect(self._delta[name]) for name in names)
            order = self._order = (names, [0, *accumulate(steps)])
        return order

    @property
    def names(self) -> SortedNames:
        """Every listed name, as one blob (merging a delta first: a copy of the listing)."""
        return self.merged()._names

    @property
    def metas(self) -> SortedNames:
        return self.merged()._metas

    def same_as(self, other: PackedListing) -> bool:
        if self is other:
            return True
        if self.shares_base(other):  # one base: the deltas say it all (the invariant)
            return self._delta == other._delta
        return self.names.blob == other.names.blob and self.metas.blob == other.metas.blob

    # -- changing (a new listing each time) ------------------------------------------------

    def with_changes(
        self, changes: Mapping[str, str | None]
    ) -> tuple[PackedListing, list[str], list[str]]:
        """This listing with each change applied (name -> its meta now, or None when gone), and
        the names that came and went (sorted). Costs a lookup a change and a copy of the
        delta: the base is shared, never copied here (`merged` folds the delta in). This
        listing itself when no change changes anything."""
        delta = None
        added: list[str] = []
        removed: list[str] = []
        for name, meta in changes.items():
            now = self.meta(name)
            if meta == now:
                continue
            if delta is None:
                delta = dict(self._delta)
            entry = delta.get(name)
            if entry is None:  # unchanged so far: `now` is the base's word
                in_base, base_meta = now is not None, now
            else:
                in_base = entry[1]
                base_meta = self._base_meta(name) if in_base else None
            if meta == base_meta:
                del delta[name]
            else:
                delta[name] = (meta, in_base)
            if now is None:
                added.append(name)
            elif meta is None:
                removed.append(name)
        if delta is None:
            return self, [], []
        fresh = self._over_base(delta, self._count + len(added) - len(removed))
        added.sort()
        removed.sort()
        return fresh, added, removed

    def _over_base(self, delta: dict[str, tuple[str | None, bool]], listed: int) -> PackedListing:
        """A listing over this one's base (the same generation, the same fold) with `delta`,
        `listed` names in all."""
        fresh = PackedListing(self._names, self._metas)
        fresh._generation, fresh._folded = self._generation, self._folded
        fresh._delta, fresh._count = delta, listed
        return fresh

    def wants_merge(self) -> bool:
        """Whether the delta has grown enough that lookups and pages should see it folded into
        the base (`merged`, then `rebased`): beyond MERGE_SHARE of the base, and MERGE_AT."""
        return len(self._delta) > max(MERGE_AT, len(self._names) // MERGE_SHARE)

    def merged(self) -> PackedListing:
        """The same listing as a base alone: the base's spans between changed names copied in
        one join (in C) - with its offsets when the base's are known (`sorted_names.Joined`),
        else found when first read by name (`prepared`)."""
        if not self._delta:
            return self
        found = self._merged
        if found is not None:
            return found
        names, metas = self._names, self._metas
        new_names, new_metas = Joined(names), Joined(metas)
        done = 0  # names[:done] are accounted for
        for key, (meta, in_base) in sorted(
            (n.encode("utf-8", "surrogateescape"), entry) for n, entry in self._delta.items()
        ):
            i = names.bisect_left(key, done)  # (the names before `done` sort before it)
            new_names.run(done, i)  # the names between two changes, copied as one span
            new_metas.run(done, i)
            done = i + 1 if in_base else i
            if meta is not None:
                new_names.one(key)
                new_metas.one(meta.encode("utf-8", "surrogateescape"))
        new_names.run(done, len(names))
        new_metas.run(done, len(names))
        if not new_names.parts:  # every name gone
            found = PackedListing()
        else:
            found = PackedListing(new_names.names(), new_metas.names())
        self._merged = found  # (two threads may both merge: either one stands)
        return found

    def prepared(self) -> PackedListing:
        """This listing with where every base name and meta begins found - what a first
        lookup would otherwise find (200 ms at a million) - so a thread that can wait pays it."""
        self._names.prepare()
        self._metas.prepare()
        return self

    def shares_base(self, other: PackedListing) -> bool:
        return self._names is other._names

    # -- as the publisher writes it, and a worker reads it ---------------------------------

    def base_blobs(self) -> tuple[bytes, bytes]:
        """The base's names and metas as the publisher writes them (the blobs held)."""
        return self._names.blob, self._metas.blob

    def delta(self) -> Mapping[str, Entry]:
        """The delta's entries (`delta_format.Entry`), not to be changed: the publisher's
        view, to find what one version changed (`delta_format.changes`)."""
        return self._delta

    def delta_over(self, written: PackedListing) -> Mapping[str, Entry] | None:
        """This listing as a delta over `written`'s base: its own delta when it shares that
        base; when its base is `written`'s with a delta folded in (`rebased`), the folded
        delta and its own as one - no lookup, a copy of the two - so the publisher can go on
        writing versions over the base workers hold while it writes the new one; else None."""
        if self.shares_base(written):
            return self._delta
        if self._folded is None or self._folded[0] != written._generation:
            return None
        folded = self._folded[1]
        composed = dict(folded)
        for name, entry in self._delta.items():
            was = folded.get(name)
            if was is not None and was[1] != entry[1]:  # the old base's word on the name
                entry = (entry[0], was[1])
            if entry[0] is None and not entry[1]:  # came with the fold, gone since
                composed.pop(name, None)
            else:
                composed[name] = entry
        return composed

    def over(self, delta: bytes) -> PackedListing:
        """This listing's base with a whole delta as the publisher writes it
        (`delta_format.encode`): a worker's next version over the base it holds. Raises
        ValueError on a delta that is not one (a torn file)."""
        entries = delta_format.decode(delta)
        if any(entry is None for entry in entries.values()):
            raise ValueError("a whole delta has no '=' entries")
        listed = len(self._names) + sum(effect(entry) for entry in entries.values())
        return self._over_base(entries, listed)  # type: ignore[arg-type]

    def changed_by(self, changes: bytes) -> PackedListing:
        """This listing with one version's changes to its delta applied (`delta_format`:
        what the publisher writes between whole deltas). Raises ValueError on a torn file."""
        delta, listed = delta_format.applied(self._delta, self._count, changes)
        return self._over_base(delta, listed)

    def changes_since(self, older: PackedListing) -> tuple[list[str], list[str], list[str] | None]:
        """(added, removed, re-described): the names listed here and not in `older`, those
        gone, and those listed in both with another meta - each sorted. Over one base the
        deltas say it all (a lookup a changed name); over two, the merged names are compared a
        run at a time (`names_diff`) and the metas are not: re-described is then None."""
        if not self.shares_base(older):
            added, removed = names_diff(older.names, self.names)
            return added, removed, None
        added, removed, described = [], [], []
        for name in sorted(self._delta.keys() | older._delta.keys()):
            was, now = older.meta(name), self.meta(name)
            if was == now:
                continue
            if was is None:
                added.append(name)
            elif now is None:
                removed.append(name)
            else:
                described.append(name)
        return added, removed, described

    def rebased(self, older: PackedListing, merged: PackedListing) -> PackedListing:
        """This listing over `merged` - `older` folded into a base, where `older` is an
        earlier listing over this one's base: what changed since `older` is this one's delta
        over the new base. The caller's duty: `older` shares this listing's base."""
        assert self.shares_base(older)
        delta: dict[str, tuple[str | None, bool]] = {}
        for name, entry in self._delta.items():
            was = older._delta.get(name)
            if was is None or was[0] != entry[0]:  # changed since `older`
                delta[name] = (entry[0], was[0] is not None if was else entry[1])
        for name in older._delta.keys() - self._delta.keys():  # back to the old base's meta
            delta[name] = (self._base_meta(name), older._delta[name][0] is not None)
        fresh = merged._over_base(delta, self._count)
        fresh._folded = (older._generation, older._delta)  # (`delta_over`)
        return fresh
