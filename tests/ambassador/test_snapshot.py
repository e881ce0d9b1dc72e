"""The snapshot: settling on an injected clock, paging, and watch events."""

from __future__ import annotations

from kube_workqueue.ambassador.snapshot import Snapshot


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_a_file_is_listed_once_it_has_held_still_for_settle_seconds():
    clock = Clock()
    snap = Snapshot(2.0, clock)
    snap.observe("a.mp4", 10, 1)
    assert snap.promote_settled() == clock.now + 2.0
    assert "a.mp4" not in snap
    clock.now += 1.5
    snap.observe("a.mp4", 20, 2)  # still growing: the wait starts again
    clock.now += 1.9
    snap.promote_settled()
    assert "a.mp4" not in snap
    clock.now += 0.1
    assert snap.promote_settled() is None
    assert "a.mp4" in snap


def test_files_at_rest_when_the_first_scan_runs_are_listed_at_once():
    clock = Clock()
    snap = Snapshot(2.0, clock)
    old_ns = int((clock.now - 60) * 1e9)
    fresh_ns = int(clock.now * 1e9)
    snap.observe("old.mp4", 1, old_ns, initial=True)
    snap.observe("fresh.mp4", 1, fresh_ns, initial=True)
    future_ns = int((clock.now + 3600) * 1e9)  # a skewed NFS clock must not hide a file long
    snap.observe("future.mp4", 1, future_ns, initial=True)
    snap.promote_settled()
    assert "old.mp4" in snap and "fresh.mp4" not in snap and "future.mp4" not in snap
    clock.now += 2
    snap.promote_settled()
    assert "fresh.mp4" in snap and "future.mp4" in snap


def test_settle_zero_lists_at_once():
    snap = Snapshot(0, Clock())
    snap.observe("a.mp4", 1, 1)
    snap.promote_settled()
    assert "a.mp4" in snap


def test_pages_resume_after_the_last_name_whatever_changed():
    snap = Snapshot(0, Clock())
    for name in ["b", "d", "f", "h"]:
        snap.observe(name, 1, 1)
    snap.promote_settled()
    names, remaining, _ = snap.page(None, 2)
    assert (names, remaining) == (["b", "d"], 2)
    snap.forget(["d"])  # the last name returned is gone
    snap.observe("c", 1, 1)  # and one sorted before it appeared
    snap.observe("e", 1, 1)
    snap.promote_settled()
    names, remaining, _ = snap.page("d", 2)
    assert (names, remaining) == (["e", "f"], 1)


def test_many_names_promoted_at_once_stay_sorted():
    snap = Snapshot(0, Clock())
    import random

    names = [f"{random.random()}.mp4" for _ in range(500)]
    for n in names:
        snap.observe(n, 1, 1)
    snap.promote_settled()
    assert snap.page(None, None)[0] == sorted(names)


def test_version_changes_with_the_listing():
    snap = Snapshot(0, Clock())
    v0 = snap.version
    snap.observe("a", 1, 1)
    snap.promote_settled()
    v1 = snap.version
    snap.observe("a", 2, 2)  # a listed file changing does not change the listing
    assert snap.version == v1 > v0
    snap.forget(["a"])
    assert snap.version > v1


def test_subscribers_get_current_names_then_changes():
    snap = Snapshot(0, Clock())
    snap.observe("a", 1, 1)
    snap.promote_settled()
    current, events = snap.subscribe()
    assert current == ["a"]
    snap.observe("b", 1, 1)
    snap.promote_settled()
    snap.forget(["a", "never-listed"])
    assert events.get_nowait() == {"type": "ADDED", "item": "b"}
    assert events.get_nowait() == {"type": "DELETED", "item": "a"}
    assert events.empty()
    snap.unsubscribe(events)
    snap.forget(["b"])
    assert events.empty()


def test_forgetting_few_or_many_keeps_the_listing_sorted_and_tells_each_name_once():
    """Both ways of forgetting (in place for a few, one pass for many) against a plain model."""
    import random

    rng = random.Random(7)
    snap = Snapshot(0, Clock())
    model: set[str] = set()
    _, events = snap.subscribe()
    for round_ in range(30):
        added = {f"{rng.randrange(5000):05d}.mp4" for _ in range(rng.choice([3, 300]))}
        snap.observe_many((n, 1, 1) for n in added)
        snap.promote_settled()
        model |= added
        gone = set(rng.sample(sorted(model), min(len(model), rng.choice([1, 10, 200]))))
        gone.add(f"never-{round_}")
        snap.forget(gone)
        model -= gone
        assert snap.page(None, None)[0] == sorted(model)
        assert len(snap) == len(model) and all(n in snap for n in list(model)[:20])
    told: dict[str, int] = {}
    while not events.empty():
        event = events.get_nowait()
        told[event["item"]] = told.get(event["item"], 0) + (1 if event["type"] == "ADDED" else -1)
    assert {n for n, count in told.items() if count == 1} == model
    assert set(told.values()) <= {0, 1}  # each ADDED at most once more than DELETED


def test_a_large_forget_is_one_version_and_pages_resume_across_it():
    snap = Snapshot(0, Clock())
    snap.observe_many((f"{i:04d}", 1, 1) for i in range(1000))
    snap.promote_settled()
    first, _, v1 = snap.page(None, 10)
    snap.forget(f"{i:04d}" for i in range(0, 1000, 2))  # 500: the one-pass path
    names, remaining, v2 = snap.page(first[-1], 5)
    assert v2 == v1 + 1
    assert names == ["0011", "0013", "0015", "0017", "0019"] and remaining == 500 - 10
