"""The listed sources' packed listing (sources/packed_listing.py) and the blobs it is made of
(sorted_names.py): order, lookups, changes and differences against a plain dict as the model,
and what a listing costs in memory."""

from __future__ import annotations

import gc
import random
import tracemalloc

import pytest

import kube_workqueue.ambassador.sorted_names as sorted_names
import kube_workqueue.ambassador.sources.packed_listing as packed
from kube_workqueue.ambassador.sorted_names import _RUN, SortedNames, names_diff
from kube_workqueue.ambassador.sources.listed import ListedSource
from kube_workqueue.ambassador.sources.packed_listing import PackedListing
from tests.support.servers import wait_until

NAMES = ["a.mp4", "b c.mp4", "z/deep.mp4", "é.mp4", "中.mp4", "😀.mp4"]  # in code point order


def model_of(listing: PackedListing) -> dict[str, str]:
    names = listing.page(None, None)[0]
    return {name: listing.meta(name) for name in names}


@pytest.mark.parametrize("chunk", [1, 3, 7, 1 << 16])
def test_where_names_begin_is_found_a_chunk_at_a_time(monkeypatch, chunk):
    monkeypatch.setattr(sorted_names, "_CHUNK", chunk)
    blob = "\0".join(NAMES).encode()
    names = SortedNames(blob)
    assert [names[i] for i in range(len(names))] == NAMES
    assert names.span(0, len(names)) == blob
    assert names.span(1, 3) == "\0".join(NAMES[1:3]).encode()
    assert names._starts.typecode == "I"  # 4 bytes a name below 4 GiB
    assert len(SortedNames(blob)) == len(NAMES)  # counted without finding where they begin


def test_lookups_in_the_sorted_blob():
    names = SortedNames("\0".join(NAMES).encode())
    for i, name in enumerate(NAMES):
        assert names.index(name) == i
        assert names.bisect_left(name.encode()) == i
        assert name in names
    assert names.index("b.mp4") is None and "b.mp4" not in names
    assert names.bisect_left(b"b") == 1
    assert names.bisect_left(b"\xff") == len(NAMES)
    assert SortedNames().index("a") is None and len(SortedNames()) == 0


def test_a_listing_in_the_stores_order_or_not_reads_the_same():
    pairs = [(name, f"m{i}") for i, name in enumerate(NAMES)]
    in_order = PackedListing.build(pairs)
    shuffled = pairs[:]
    random.Random(1).shuffle(shuffled)
    out_of_order = PackedListing.build([*shuffled, ("a.mp4", "again")])  # the last word stands
    assert model_of(in_order) == dict(pairs)
    assert model_of(out_of_order) == {**dict(pairs), "a.mp4": "again"}
    assert out_of_order.page(None, None)[0] == NAMES  # sorted as Python sorts str
    assert in_order.page("b c.mp4", 2) == (["z/deep.mp4", "é.mp4"], 2)
    assert in_order.meta("missing") is None and "missing" not in in_order
    assert len(PackedListing.build([])) == 0


def test_changes_apply_as_a_dict_update_would():
    rng = random.Random(7)
    model = {f"item-{i:05d}.mp4": f"meta-{i}" for i in range(0, 3000, 2)}
    listing = PackedListing.build(sorted(model.items()))
    for _ in range(40):
        changes: dict[str, str | None] = {}
        for _ in range(rng.randint(1, 30)):
            name = f"item-{rng.randrange(3100):05d}.mp4"
            changes[name] = None if rng.random() < 0.4 else f"new-{rng.random()}"
        before = set(model)
        listing, added, removed = listing.with_changes(changes)
        for name, meta in changes.items():
            if meta is None:
                model.pop(name, None)
            else:
                model[name] = meta
        assert model_of(listing) == dict(sorted(model.items()))
        assert added == sorted(set(model) - before) and removed == sorted(before - set(model))
        assert len(listing) == len(model)
        pages_read_as_the_model(listing, sorted(model), rng)
        assert model_of(listing.merged()) == dict(sorted(model.items()))
    emptied, added, removed = listing.with_changes(dict.fromkeys(model))
    assert len(emptied) == 0 and added == [] and removed == sorted(model)  # every name gone


def pages_read_as_the_model(listing: PackedListing, names: list[str], rng) -> None:
    """Pages of `listing` - after no name, a listed one, an unlisted one, past the end; of
    sizes 0 to past the end - against `names`, the model's sorted names."""
    for _ in range(8):
        after = rng.choice([None, "", "zzz", *rng.sample(names, min(3, len(names))),
                            f"item-{rng.randrange(3100):05d}.mp4x"])  # fmt: skip
        limit = rng.choice([0, 1, 7, 100, len(names) + 5])
        rest = [n for n in names if after is None or n > after]
        assert listing.page(after, limit) == (rest[:limit], max(0, len(rest) - limit)), after
    assert listing.page(None, None) == (names, 0)


@pytest.mark.parametrize("shifted", [3, 1 << 14])
def test_a_delta_folded_into_a_new_base_keeps_what_changed_since(monkeypatch, shifted):
    """The background merge's three steps (listed.py `_tidied`): an older listing is merged
    while changes go on over the old base; the newer one, rebased on the merge, reads as the
    model - names changed again, back to the old base's meta, removed and re-added; the new
    base's offsets, made from the old base's a few at a time, are where its names begin."""
    monkeypatch.setattr(sorted_names, "_SHIFTED", shifted)
    rng = random.Random(3)
    model = {f"item-{i:05d}.mp4": f"meta-{i}" for i in range(0, 2000, 2)}
    listing = PackedListing.build(sorted(model.items()))
    for rounds in range(30):
        older = listing
        for _ in range(rng.randint(1, 4)):
            changes: dict[str, str | None] = {}
            for _ in range(rng.randint(1, 40)):
                i = rng.randrange(2100)
                name = f"item-{i:05d}.mp4"
                changes[name] = rng.choice([None, f"meta-{i}", f"new-{rounds}"])
            listing = listing.with_changes(changes)[0]
            model.update(changes)
            model = {k: v for k, v in model.items() if v is not None}
        merged = older.merged()
        if rounds:  # the base before was read by name: the merge's offsets come with it
            for blobs in (merged._names, merged._metas):
                assert blobs._found == sorted_names.starts_of(blobs.blob)
        merged = merged.prepared()
        assert merged.same_as(older) and not merged._delta
        listing = listing.rebased(older, merged)
        assert listing.shares_base(merged) and len(listing) == len(model)
        assert model_of(listing) == dict(sorted(model.items()))
        pages_read_as_the_model(listing, sorted(model), rng)


@pytest.mark.parametrize("changed", [0, 1, 5, 200])
def test_the_names_that_came_and_went_are_found_whatever_their_place(changed):
    rng = random.Random(changed)
    before = {f"n{i:06d}" for i in range(0, 20 * _RUN, 3)}
    after = set(before)
    for _ in range(changed):
        name = f"n{rng.randrange(20 * _RUN + 10):06d}"
        after.symmetric_difference_update({name})
    after |= {"a-first", "zz-last"} if changed else set()
    older = SortedNames("\0".join(sorted(before)).encode())
    newer = SortedNames("\0".join(sorted(after)).encode())
    added, removed = names_diff(older, newer)
    assert added == sorted(after - before)
    assert removed == sorted(before - after)
    assert names_diff(SortedNames(), newer) == (sorted(after), [])
    assert names_diff(older, SortedNames()) == ([], sorted(before))


class Lister:
    where = "test"

    def __init__(self, listing: dict[str, str]):
        self.listing = listing

    def list_all(self):
        return dict(self.listing)

    def describe(self, name, meta):
        return {"name": name, "version": meta}

    def changes(self, stop):
        return None


def test_watchers_hear_each_name_once_and_versions_grow_only_with_change():
    lister = Lister({"a.mp4": "1", "b.mp4": "1"})
    source = ListedSource(lister, poll_interval=3600)
    source.start()
    try:
        names, events = source.subscribe()
        assert names == ["a.mp4", "b.mp4"]
        version = source.version
        source._relist()  # nothing new: no event, the same version
        assert source.version == version and events.empty()
        lister.listing = {"b.mp4": "2", "c.mp4": "1"}
        source._relist()
        assert source.version == version + 1
        assert [events.get_nowait() for _ in range(2)] == [
            {"type": "DELETED", "item": "a.mp4"},
            {"type": "ADDED", "item": "c.mp4"},
        ]
        assert source.get("b.mp4") == {"name": "b.mp4", "version": "2"}  # overwritten in place
        assert source.get("a.mp4") is None
        source.apply([("d.mp4", "1"), ("c.mp4", None), ("nothing.mp4", None)])
        assert [events.get_nowait() for _ in range(2)] == [
            {"type": "DELETED", "item": "c.mp4"},
            {"type": "ADDED", "item": "d.mp4"},
        ]
        assert events.empty() and source.version == version + 2
        published_version, listing, told = source.published(events)
        assert published_version == version + 2 and told == []  # (all taken above)
        assert (listing.names.blob, listing.metas.blob) == (b"b.mp4\0d.mp4", b"2\x001")
        source.unsubscribe(events)
    finally:
        source.stop()


def test_a_listing_costs_its_bytes_and_a_few_more_an_item():
    """100,000 objects' names and S3-sized metas, as the store lists them: held in under 70
    bytes an item (the names here are 18 bytes, the metas 35). Kept as Python strings in a set,
    a sorted list and a dict, the same listing took about 240."""
    count = 100_000
    meta = "A" * 22 + "\t" + "1f4a" + "\t" + "6565f0a1"
    gc.collect()
    tracemalloc.start()
    listing = PackedListing.build((f"videos-{i:07d}.mp4", meta) for i in range(count))
    assert listing.meta("videos-0000042.mp4") == meta  # read by name: its offsets found too
    assert listing.metas[count - 1] == meta
    gc.collect()
    kept = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert len(listing) == count
    assert kept / count < 70, kept / count


def test_a_source_folds_its_delta_in_the_background_under_the_same_version(monkeypatch):
    monkeypatch.setattr(packed, "MERGE_AT", 8)
    source = ListedSource(Lister({f"a{i:03d}.mp4": "1" for i in range(100)}), poll_interval=3600)
    source.start()
    try:
        _, events = source.subscribe()
        for i in range(30):
            source.apply([(f"b{i:03d}.mp4", "1"), (f"a{i:03d}.mp4", None)])
        version = source.version
        wait_until(lambda: len(source._listing._delta) <= 8)  # merged, rebased, swapped in
        assert source.version == version and source._listing.page("a099.mp4", 2) == (
            ["b000.mp4", "b001.mp4"],
            28,
        )
        assert [events.get_nowait()["type"] for _ in range(60)].count("ADDED") == 30
        assert events.empty()  # the merge told the watchers nothing: nothing came or went
        source.unsubscribe(events)
    finally:
        source.stop()


def test_a_lookup_from_a_known_lower_bound_finds_what_a_bisection_finds():
    """`SortedNames.bisect_left(key, low)` gallops from `low` (keys looked up in order, as a
    fold does): wherever `low` is at or before the key's place, the answer is the same."""
    import bisect

    rng = random.Random(9)
    for _ in range(60):
        names = sorted({f"n{rng.randrange(5000):05d}" for _ in range(rng.randrange(1, 300))})
        packed = SortedNames("\0".join(names).encode())
        raw = [n.encode() for n in names]
        for _ in range(20):
            key = f"n{rng.randrange(5100):05d}".encode() + rng.choice([b"", b"x"])
            place = bisect.bisect_left(raw, key)
            assert packed.bisect_left(key) == place
            assert packed.bisect_left(key, rng.randrange(place + 1)) == place


def test_metas_asked_in_a_pages_order_or_any_other_read_as_meta_does():
    """`metas_in_order` (a full view's page: each search starts at the last name's place)
    answers as `meta` does - for a page's names in their order, for names asked out of order,
    twice, unlisted, or changed in the delta (came, went, described anew)."""
    rng = random.Random(13)
    names = [f"item-{i:05d}.mp4" for i in range(0, 3000, 2)]
    listing = PackedListing.build((n, f"meta-{n}") for n in names)
    listing, _, _ = listing.with_changes({"item-00003.mp4": "came", "item-00010.mp4": None,
                                          "item-00012.mp4": "anew"})  # fmt: skip
    for _ in range(30):
        after = rng.choice([None, *rng.sample(names, 3)])
        page = listing.page(after, rng.choice([1, 32, 1000]))[0]
        asked = page + rng.sample(page, min(3, len(page)))  # then some of them again
        asked += [f"item-{rng.randrange(3100):05d}.mp4" for _ in range(5)]  # any, any order
        meta_of = listing.metas_in_order()
        assert [meta_of(n) for n in asked] == [listing.meta(n) for n in asked]
