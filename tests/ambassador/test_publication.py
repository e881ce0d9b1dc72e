"""What the publisher writes and a gunicorn worker reads (`ambassador/publication.py`): a listed
source's base once, each version's delta over it, and a worker's listing, lookups and watch
events the same as the source's own - over one base, and across a new one."""

from __future__ import annotations

import os
import random

import pytest

from kube_workqueue.ambassador.publication import Publisher
from kube_workqueue.ambassador.shared_snapshot import SharedSnapshot
from kube_workqueue.ambassador.sources import delta_format
from kube_workqueue.ambassador.sources.packed_listing import PackedListing
from kube_workqueue.ambassador.timed_queue import TimedQueue
from tests.support.servers import wait_until

SORTED_SET = {"SOURCE_TYPE": "redis", "REDIS_URL": "redis://127.0.0.1:1/0", "REDIS_KEY": "k",
              "REDIS_SORTED": True}  # fmt: skip


def meta(priority: int, data: str = "-") -> str:
    return f"p{priority}:{data}"  # a sorted set member's: its score, its data's meta


def events_until(worker: SharedSnapshot, q: TimedQueue, version: int) -> list[dict]:
    """The events `q` got up to `version`: the follower puts a version's events and then
    notes the watcher at it, under one lock, so once it is noted they are all there."""
    wait_until(lambda: worker._watchers.get(q) == version, timeout=30)
    out = []
    while not q.empty():
        out.append(q.get_nowait())
    return out


def random_changes(rng: random.Random, most: int, among: int) -> dict[str, str | None]:
    """Up to `most` changes to names n0000.mp4 to n{among - 1}: gone (None) or a new meta."""
    changes: dict[str, str | None] = {}
    for _ in range(rng.randrange(1, most)):
        name = f"n{rng.randrange(among):04d}.mp4"
        changes[name] = None if rng.random() < 0.4 else meta(rng.randrange(3))
    return changes


def changed_model(model: dict[str, str], changes: dict[str, str | None]) -> dict[str, str]:
    """`changes` applied to `model` (in place); returns the model as it was before."""
    before = dict(model)
    for name, now in changes.items():
        if now is None:
            model.pop(name, None)
        else:
            model[name] = now
    return before


def events_between(before: dict[str, str], model: dict[str, str]) -> list[dict]:
    """What a watcher hears from `before` to `model`: the names gone, then those that came or
    whose priority moved (ADDED again), each sorted."""
    removed = sorted(before.keys() - model.keys())
    moved = {n for n in model.keys() & before.keys() if model[n] != before[n]}  # priority
    added = sorted((model.keys() - before.keys()) | moved)
    return [*({"type": "DELETED", "item": n} for n in removed),
            *({"type": "ADDED", "item": n} for n in added)]  # fmt: skip


@pytest.fixture
def published(tmp_path):
    publisher = Publisher(str(tmp_path))
    worker = SharedSnapshot(str(tmp_path), dict(SORTED_SET))
    yield publisher, worker, tmp_path
    worker.stop()


def test_a_version_over_the_same_base_is_written_as_its_delta(published):
    publisher, worker, folder = published
    listing = PackedListing.build((f"clip-{i:04d}.mp4", meta(0)) for i in range(1000))
    publisher.write(1, listing)
    listing, _, _ = listing.with_changes({"clip-0001.mp4": None, "new.mp4": meta(7),
                                          "clip-0002.mp4": meta(3)})  # fmt: skip
    publisher.write(2, listing)
    files = sorted(os.listdir(folder))
    assert files == ["changes-000000000002", "current", "delta-000000000001",
                     "meta-000000000001", "names-000000000001"]  # fmt: skip
    assert (folder / "current").read_text() == "2 names-000000000001 delta-000000000001\n"
    # version 2 as its changes to version 1's (empty) delta: the names before, their signs
    assert (folder / "changes-000000000002").read_bytes().split(b"\0")[::3] == [
        b"1\nclip-0001.mp4", b"clip-0002.mp4", b"new.mp4"]  # fmt: skip
    assert worker.version == 2 and len(worker) == 1000
    assert worker.page(None, 3)[0] == ["clip-0000.mp4", "clip-0002.mp4", "clip-0003.mp4"]
    assert worker.page("clip-0998.mp4", None)[0] == ["clip-0999.mp4", "new.mp4"]
    assert worker.get("clip-0001.mp4") is None
    assert worker.get("new.mp4")["priority"] == 7
    assert worker.priorities(["clip-0002.mp4", "clip-0003.mp4"]) == {"clip-0002.mp4": 3}
    assert worker.json_names()[0].startswith(b'["clip-0000.mp4","clip-0002.mp4",')


def test_watchers_hear_what_changed_over_one_base_and_across_a_new_one(published):
    """A model of the items beside the published versions: at each step, the worker's listing
    is the model's, and a watcher's events take it from the last version to this one - with a
    priority that moved heard as ADDED again; every few steps the delta is folded into a new
    base (as the source's own thread does) and the worker reads that base whole."""
    publisher, worker, _ = published
    rng = random.Random(7)
    model = {f"n{i:04d}.mp4": meta(rng.randrange(3)) for i in range(600)}
    listing = PackedListing.build(sorted(model.items()))
    publisher.write(1, listing)
    names, watch = worker.subscribe()
    assert names == sorted(model)
    for version in range(2, 14):
        changes = random_changes(rng, 40, 700)
        before = changed_model(model, changes)
        listing, _, _ = listing.with_changes(changes)
        if version % 4 == 0:  # folded into a new base, as ListedSource._tidy does
            listing = listing.merged().prepared()
        publisher.write(version, listing)
        assert worker.version == version
        assert worker.page(None, None)[0] == sorted(model)
        assert events_until(worker, watch, version) == events_between(before, model), version
    worker.unsubscribe(watch)


def test_a_folder_is_written_whole_and_diffed_by_names(tmp_path):
    publisher = Publisher(str(tmp_path))
    worker = SharedSnapshot(str(tmp_path), {"ROOT": str(tmp_path)})
    try:
        publisher.write(1, b"a.mp4\0b.mp4")
        names, watch = worker.subscribe()
        assert names == ["a.mp4", "b.mp4"]
        publisher.write(2, b"b.mp4\0c.mp4")
        assert events_until(worker, watch, 2) == [{"type": "DELETED", "item": "a.mp4"},
                                    {"type": "ADDED", "item": "c.mp4"}]  # fmt: skip
        assert (tmp_path / "current").read_text() == "2 names-000000000002\n"
        worker.unsubscribe(watch)
    finally:
        worker.stop()


def test_a_listed_source_tells_its_watchers_what_the_source_told_and_a_gap_is_diffed(published):
    """With each version the publisher writes the events the source told its own watchers (a
    worker's watchers get those, in order, across any number of versions); a version whose
    events are not written - one no longer kept - is found by comparing listings."""
    publisher, worker, folder = published
    listing = PackedListing.build([("a.mp4", meta(0)), ("b.mp4", meta(0))])
    publisher.write(1, listing)
    watch = worker.subscribe_events()
    listing, _, _ = listing.with_changes({"c.mp4": meta(0)})
    came_went_came = [
        {"type": "ADDED", "item": "c.mp4"},
        {"type": "DELETED", "item": "c.mp4"},
        {"type": "ADDED", "item": "c.mp4"},
    ]  # (what no diff of listings says)
    publisher.write(2, listing, came_went_came)
    listing, _, _ = listing.with_changes({"c.mp4": None, "d.mp4": meta(0)})
    told = [{"type": "DELETED", "item": "c.mp4"}, {"type": "ADDED", "item": "d.mp4"}]
    publisher.write(3, listing, told)  # (the follower may see 2 and 3 together, or in turn)
    assert events_until(worker, watch, 3) == [*came_went_came, *told]
    listing, _, _ = listing.with_changes({"a.mp4": None, "e.mp4": meta(0)})
    publisher.write(4, listing)  # no events written: the listings compared
    assert not (folder / "events-000000000004").exists()
    assert events_until(worker, watch, 4) == [{"type": "DELETED", "item": "a.mp4"},
                                              {"type": "ADDED", "item": "e.mp4"}]  # fmt: skip
    worker.unsubscribe(watch)


def test_a_folds_base_is_written_beside_the_versions_and_read_ahead_before_it_is_used(tmp_path):
    """A fold as the source makes it (`rebased`: a listing folded while more changes came):
    the versions go on over the base workers hold - the folded delta and the new one as one -
    while a thread writes the new base; `current` then names it as coming, a worker reads it
    ahead, and only after the lead do versions use it. At every version the worker's listing
    is the model's and a watcher hears exactly what changed."""
    publisher = Publisher(str(tmp_path), lead=0.0)
    worker = SharedSnapshot(str(tmp_path), dict(SORTED_SET))
    try:
        rng = random.Random(11)
        model = {f"n{i:04d}.mp4": meta(rng.randrange(3)) for i in range(400)}
        listing = PackedListing.build(sorted(model.items()))
        publisher.write(1, listing)
        watch = worker.subscribe_events()
        folding = None  # the listing being folded, as the source's thread holds it
        lines = []
        ahead = None
        for version in range(2, 30):
            changes = random_changes(rng, 30, 500)
            before = changed_model(model, changes)
            listing, _, _ = listing.with_changes(changes)
            if version % 9 == 2:
                folding = listing  # the fold starts here; changes go on meanwhile
            elif folding is not None and version % 9 == 4:
                listing = listing.rebased(folding, folding.merged().prepared())
                folding = None
            publisher.write(version, listing)
            lines.append((tmp_path / "current").read_text().split())
            publisher.settle(timeout=30)
            assert worker.version == version
            assert worker.page(None, None)[0] == sorted(model)
            assert all(worker.get(n)["priority"] == int(m[1]) for n, m in model.items())
            assert events_until(worker, watch, version) == events_between(before, model)
            line = lines[-1]
            if line[-1].startswith("coming:"):  # the new base is named: a worker reads it ahead
                wait_until(lambda: worker._ahead is not None and worker._ahead[2] is not None,
                           timeout=30)  # fmt: skip
                ahead = worker._ahead
            elif ahead is not None and line[1] == ahead[0]:  # the first version over it
                assert worker._listing.shares_base(ahead[2])  # ... found it read
                ahead = None
        # a fold (versions 4, 13, 22) is written beside the versions over the base before,
        # then named as coming, and used only after that
        bases = [line[1] for line in lines]
        for fold in (4, 13, 22):
            new_base = f"names-{fold:012d}"
            first = bases.index(new_base)
            assert bases[fold - 2] == bases[fold - 3] != new_base  # (lines[0]: version 2)
            assert first > fold - 2 and lines[first - 1][-1] == "coming:" + new_base
            assert all(len(line) == 3 for line in lines[fold - 2 : first - 1])
        assert sum(1 for line in lines if line[-1].startswith("coming:")) == 3
        worker.unsubscribe(watch)
    finally:
        worker.stop()


def test_a_worker_catches_up_from_any_version_it_holds(published):
    """Between whole deltas each version is written as its changes; a worker that looked last
    a version ago, a few ago, across a whole delta, or longer ago than the changes are kept,
    reads the same listing as the source's."""
    publisher, worker, folder = published
    rng = random.Random(5)
    model = {f"n{i:04d}.mp4": meta(rng.randrange(3)) for i in range(300)}
    listing = PackedListing.build(sorted(model.items()))
    publisher.write(1, listing)
    assert worker.version == 1
    version = 1
    for gap in (1, 3, 9, 20, 2, 1):  # versions written before the worker looks again
        for _ in range(gap):
            version += 1
            changes = random_changes(rng, 12, 360)
            changes["hot.mp4"] = meta(version % 3)  # changed by every version: order matters
            changed_model(model, changes)
            listing, _, _ = listing.with_changes(changes)
            publisher.write(version, listing)
        assert worker.version == version
        assert len(worker) == len(model)
        assert worker.page(None, None)[0] == sorted(model)
        assert all(worker.get(n)["priority"] == int(m[1]) for n, m in model.items())
    assert sum(1 for n in os.listdir(folder) if n.startswith("changes-")) == 16  # (kept)


def test_a_deltas_changes_take_it_from_one_version_to_the_next():
    rng = random.Random(3)
    for _ in range(200):
        before = {f"n{i}": (rng.choice([None, "a", "b"]), rng.random() < 0.5)
                  for i in rng.sample(range(40), rng.randrange(20))}  # fmt: skip
        before = {n: e for n, e in before.items() if e[0] is not None or e[1]}
        after = dict(before)
        for name in rng.sample(range(40), rng.randrange(10)):
            if rng.random() < 0.3:
                after.pop(f"n{name}", None)
            else:
                entry = (rng.choice([None, "a", "c"]), rng.random() < 0.5)
                if entry[0] is not None or entry[1]:
                    after[f"n{name}"] = entry
        blob = delta_format.encode(delta_format.changes(before, after))
        listed = 100 + sum(delta_format.effect(e) for e in before.values())
        got, count = delta_format.applied(before, listed, blob)
        assert got == after
        assert count == 100 + sum(delta_format.effect(e) for e in after.values())


def test_a_page_of_data_is_read_through_one_look_at_the_newest_version(published, monkeypatch):
    """`reader` (how the full view reads a page: `sources.base.ReadsPages`) looks at `current`
    once and reads every name from the version it found, even one published meanwhile; `get`
    looks each time."""
    publisher, worker, _ = published
    names = [f"n{i:04d}.mp4" for i in range(100)]
    publisher.write(1, PackedListing.build((n, meta(1)) for n in names))
    first = [worker.get(n) for n in names]
    looks: list[str] = []
    stat = os.stat

    def counted(path, *args, **kwargs):
        looks.extend([str(path)] if str(path).endswith("current") else [])
        return stat(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", counted)
    read = worker.reader()
    publisher.write(2, PackedListing.build((n, meta(2, '"b"')) for n in names[1:]))
    assert [read(n) for n in names] == first and len(looks) == 1
    assert worker.get(names[0]) is None and worker.get(names[1]) != first[1]
    assert len(looks) == 3
