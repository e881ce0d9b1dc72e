"""Distrusting sudden emptiness (`manager.runtime.removal_guard`, through `Removals` and the
poller): which removals are held, how a hold ends - by persisting, by the items coming back, by
being accepted - and a watch stream's DELETED events proved by one listing, so a mass removal
sent one event at a time is held whole. Time is stepped, not waited for."""

from __future__ import annotations

import logging

from kube_workqueue.manager.runtime.poller import Poller
from kube_workqueue.manager.runtime.removal_guard import RemovalGuard
from kube_workqueue.manager.runtime.removals import Removals


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def guarded(**kw) -> tuple[Removals, Clock, list]:
    clock, told = Clock(), []
    guard = RemovalGuard(clock=clock, changed=lambda: told.append(guard.reason()), **kw)
    return Removals(guard), clock, told


def names(n: int) -> list[str]:
    return [f"item-{i:02d}" for i in range(n)]


def test_what_is_held_every_item_or_more_than_half_and_at_least_ten():
    guard = RemovalGuard()
    assert guard.is_mass(3, 3)  # every one of them, however few
    assert guard.is_mass(11, 20)  # more than half, at least 10
    assert not guard.is_mass(10, 20)  # half is not more than half
    assert not guard.is_mass(9, 12)  # more than half, but fewer than 10
    assert not guard.is_mass(0, 0) and not guard.is_mass(1, 40)
    assert RemovalGuard(fraction=0.2, minimum=3).is_mass(3, 10)


def test_an_ordinary_removal_is_acted_on_at_once():
    removals, _, told = guarded()
    removals.listing(names(40), 1)
    assert removals.listing(names(40)[:-3], 2) == ["item-37", "item-38", "item-39"]
    assert told == []


def test_a_sudden_emptiness_is_held_said_once_and_acted_on_after_the_hold(caplog):
    removals, clock, told = guarded(hold=300)
    removals.listing(names(40), 1)
    with caplog.at_level(logging.WARNING, logger="kube_workqueue.manager"):
        assert removals.listing([], 2) == []
        clock.now += 60
        assert removals.listing([], 3) == []  # still held: nothing cancelled or forgotten
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and "the source lost 40 of 40 items at once" in said[0]
    assert removals.guard.count() == 40
    assert "held: the source lost 40 of 40 items at once" in told[0]
    clock.now += 240
    assert removals.listing([], 4) == names(40)  # it persisted: acted on now
    assert removals.guard.reason() is None and told[-1] is None
    assert removals.listing([], 5) == []  # and once only


def test_items_that_come_back_are_not_removed_and_all_back_ends_the_hold():
    removals, clock, told = guarded()
    removals.listing(names(20), 1)
    assert removals.listing(names(20)[:2], 2) == []  # 18 of 20 gone: held
    assert removals.listing(names(20)[:5], 3) == []  # three came back
    assert removals.guard.count() == 15
    assert removals.listing(names(20), 4) == []  # all back: nothing was cancelled
    assert removals.guard.reason() is None and told[-1] is None
    clock.now += 10_000
    assert removals.listing(names(20), 5) == []


def test_removals_while_held_join_the_hold_and_accepting_acts_on_all():
    removals, _, _ = guarded()
    removals.listing(names(30), 1)
    assert removals.listing(names(30)[:10], 2) == []  # 20 of 30: held
    assert removals.listing(names(30)[:8], 3) == []  # two more leave: they wait too
    assert removals.guard.accept() == names(30)[8:]
    assert removals.guard.accept() == []
    assert removals.listing(names(30)[:7], 4) == ["item-07"]  # ordinary again


class WatchedSource:
    base_url = "http://source.test"

    def __init__(self) -> None:
        self.listed, self.listing_version, self.lists = names(25), 1, 0

    def list_items(self):
        self.lists += 1
        return list(self.listed)


def test_deleted_events_of_a_mass_removal_are_held_whole_by_one_listing():
    source, cancelled = WatchedSource(), []
    poller = Poller(source, lambda names: None, on_removed=cancelled.extend,
                    guard=RemovalGuard())  # fmt: skip
    poller.poll_once_listing()
    source.listed, source.listing_version = [], 2  # FLUSHALL: the stream sends 25 DELETEDs
    for name in names(25):
        poller._event({"type": "DELETED", "item": name})
    assert cancelled == [] and poller.removals.guard.count() == 25
    assert source.lists == 2  # one listing proved them all; later events needed none
    source.listed, source.listing_version = names(25), 3  # Redis came back with them all
    poller.poll_once_listing()
    assert poller.removals.guard.reason() is None and cancelled == []
    source.listed, source.listing_version = [n for n in names(25) if n != "item-01"], 4
    poller._event({"type": "DELETED", "item": "item-01"})
    assert cancelled == ["item-01"]  # one at a time is no mass removal: acted on at once


def test_a_source_that_stays_empty_at_one_version_still_ends_the_hold():
    removals, clock, _ = guarded(hold=60)
    removals.listing(names(12), 1)
    assert removals.listing([], 2) == []
    clock.now += 61
    assert removals.listing([], 2) == names(12)  # the same version: no new removal, but due


def test_a_restored_hold_says_what_it_is_before_its_first_listing():
    """A manager that starts under a hold an earlier one recorded: status reads its reason
    before any listing - never "the source lost 0 of 0 items"."""
    guard = RemovalGuard(hold=300.0, clock=lambda: 1000.0, restored=900.0)
    said = guard.reason()
    assert "lost 0 of 0" not in said and "held since" in said and "earlier run" in said
    guard.consider(["a", "b"], 0, [])  # the first listing: what left is held on
    assert "lost 2 of 2 items" in guard.reason()
