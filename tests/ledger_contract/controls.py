"""The queue's controls, one behaviour for every store (`manager.ports.QueueControls`): what is
asked of a queue as a whole - a pause, a parallelism, group rules, a hold of removals, removals
accepted - is read back as
asked, outlives the manager that asked it, and one kind asked leaves the others as they were.
Each ledger's own tests run these against it (`LedgerContract`)."""

from __future__ import annotations

import time

import pytest

from tests.support.servers import wait_until


class Controls:
    """The queue's controls, case by case, against `subject` (a `Subject`)."""

    def test_a_parallelism_asked_is_read_back_and_outlives_the_manager(self, subject):
        ledger = subject.ledger
        assert ledger.wanted_parallelism() is None  # nobody asked
        ledger.want_parallelism(7)
        wait_until(lambda: ledger.wanted_parallelism() == 7, timeout=30)
        ledger.want_parallelism(0)  # 0 holds the queue: nothing new starts
        wait_until(lambda: ledger.wanted_parallelism() == 0, timeout=30)
        subject.reopen()
        wait_until(lambda: subject.ledger.wanted_parallelism() == 0, timeout=30)

    def test_a_hold_of_removals_outlives_the_manager_until_it_ends(self, subject):
        ledger = subject.ledger
        assert ledger.removals_held_since() is None
        ledger.hold_removals(1_700_000_000.5)
        subject.reopen()  # a manager that starts holds on
        wait_until(lambda: subject.ledger.removals_held_since() == 1_700_000_000.5, timeout=30)
        subject.ledger.hold_removals(None)
        wait_until(lambda: subject.ledger.removals_held_since() is None, timeout=30)
        assert subject.ledger.removals_accepted() is None  # nobody accepted anything

    def test_group_rules_asked_of_the_queue_are_read_back_and_each_kind_kept(self, subject):
        ledger = subject.ledger
        assert ledger.wanted_group_rules() is None
        ledger.want_group_rules({"limits": ["acme=2", "*=5"]})
        wait_until(lambda: ledger.wanted_group_rules() == {"limits": ["acme=2", "*=5"]}, timeout=30)
        ledger.want_group_rules({"rates": ["acme=100/1m"]})  # the limits asked stay
        both = {"limits": ["acme=2", "*=5"], "rates": ["acme=100/1m"]}
        wait_until(lambda: ledger.wanted_group_rules() == both, timeout=30)
        subject.reopen()  # what was asked outlives the manager
        wait_until(lambda: subject.ledger.wanted_group_rules() == both, timeout=30)

    def test_a_pause_is_read_back_outlives_the_manager_and_ends_with_a_resume(self, subject):
        ledger = subject.ledger
        assert ledger.paused_since() is None
        before = time.time()
        ledger.set_paused(before)  # what `workqueue pause` asks, through the same object
        wait_until(lambda: ledger.paused_since() is not None, timeout=30)
        since = ledger.paused_since()
        assert since == pytest.approx(before, abs=60)  # (a WorkQueue says when it saw it)
        subject.reopen()  # a manager that starts finds the queue paused
        wait_until(lambda: subject.ledger.paused_since() is not None, timeout=30)
        subject.ledger.set_paused(None)
        wait_until(lambda: subject.ledger.paused_since() is None, timeout=30)

    def test_removals_accepted_are_read_back_as_a_later_time(self, subject):
        ledger = subject.ledger
        assert ledger.removals_accepted() is None
        before = time.time()
        ledger.accept_removals()
        wait_until(lambda: ledger.removals_accepted() is not None, timeout=30)
        assert ledger.removals_accepted() >= before - 1
