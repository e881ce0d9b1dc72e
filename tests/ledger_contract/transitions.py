"""The item's life, one behaviour for every ledger (`manager.ports.Ledger`): each ledger's own
tests run these against it (`LedgerContract`). A ledger that fails one is not a ledger."""

from __future__ import annotations

import pytest

from kube_workqueue.manager.ports import State


class Transitions:
    """The item's transitions, case by case, against `subject` (a `Subject`)."""

    def test_an_unknown_name_has_no_state_and_a_seen_one_waits_with_no_attempts(self, subject):
        ledger = subject.ledger
        assert ledger.state("a") is None and ledger.row("a") is None
        assert ledger.see(["a", "b"]) == ["a", "b"]
        assert ledger.see(["b", "c", "a"]) == ["c"]  # only what was never seen
        assert [ledger.state(n) for n in "abc"] == [("pending", 0)] * 3
        assert ledger.priority("a") == 0

    def test_a_start_counts_the_attempt_and_an_end_keeps_it(self, subject):
        ledger = subject.ledger
        ledger.see(["ok", "bad"])
        assert subject.start("ok") == 1 and ledger.state("ok") == ("running", 1)
        subject.finish("ok", True, 0, None)
        assert ledger.state("ok") == ("succeeded", 1)
        assert subject.start("bad") == 1
        subject.finish("bad", False, 3, "exit code 3")
        assert ledger.state("bad") == ("failed", 1)
        assert subject.start("bad") == 2  # a failed item starts again: its second attempt
        assert ledger.state("bad") == ("running", 2)
        subject.finish("bad", False, 3, "exit code 3")
        row = ledger.row("bad")
        assert (row.state, row.attempts, row.exit_code, row.last_error) == (
            "failed", 2, 3, "exit code 3")  # fmt: skip
        assert row.started is not None and row.finished is not None

    def test_a_requeue_gives_the_attempt_back(self, subject):
        ledger = subject.ledger
        ledger.see(["a"])
        subject.start("a")
        ledger.requeue("a")
        assert ledger.state("a") == ("pending", 0)
        assert subject.start("a") == 1  # the same number again: the first never counted
        subject.finish("a", False, 1, "exit code 1")
        assert subject.start("a") == 2
        ledger.requeue("a")
        assert ledger.state("a") == ("pending", 1)

    @pytest.mark.parametrize("before", ["pending", "running", "failed"])
    def test_an_item_that_has_not_finished_can_be_cancelled(self, subject, before):
        ledger = subject.ledger
        ledger.see(["a"])
        if before != "pending":
            subject.start("a")
        if before == "failed":
            subject.finish("a", False, 1, "exit code 1")
        attempts = ledger.state("a")[1]
        assert ledger.cancel("a") is True
        assert ledger.state("a") == ("cancelled", attempts)

    @pytest.mark.parametrize("before", ["succeeded", "cancelled", "unknown"])
    def test_a_finished_or_unknown_item_is_not_cancelled(self, subject, before):
        ledger = subject.ledger
        if before != "unknown":
            ledger.see(["a"])
            subject.start("a")
            if before == "succeeded":
                subject.finish("a", True, 0, None)
            else:
                ledger.cancel("a")
        was = ledger.state("a")
        assert ledger.cancel("a") is False
        assert ledger.state("a") == was

    @pytest.mark.parametrize("before", ["succeeded", "failed", "cancelled"])
    def test_a_finished_item_runs_again_as_new(self, subject, before):
        ledger = subject.ledger
        ledger.see(["a"])
        subject.start("a", "v1")
        if before == "cancelled":
            ledger.cancel("a")
        else:
            subject.finish("a", before == "succeeded", 0 if before == "succeeded" else 1, None)
        assert ledger.rerun("a", "v2") is True
        assert ledger.state("a") == ("pending", 0)
        assert subject.start("a", "v2") == 1  # a new series of attempts
        assert ledger.version_ran("a") == "v2"

    @pytest.mark.parametrize("before", ["pending", "running", "unknown"])
    def test_an_item_that_has_not_finished_does_not_run_again(self, subject, before):
        ledger = subject.ledger
        if before != "unknown":
            ledger.see(["a"])
        if before == "running":
            subject.start("a")
        was = ledger.state("a")
        assert ledger.rerun("a", "v2") is False
        assert ledger.state("a") == was

    def test_the_version_an_attempt_ran_at_is_kept(self, subject):
        ledger = subject.ledger
        ledger.see(["a", "b"])
        assert ledger.version_ran("a") is None
        subject.start("a", "v1")
        assert ledger.version_ran("a") == "v1"
        subject.finish("a", True, 0, None)
        assert ledger.version_ran("a") == "v1"
        subject.start("b")
        assert ledger.version_ran("b") is None

    def test_priorities_are_kept_and_zero_is_none(self, subject):
        ledger = subject.ledger
        ledger.see(["a", "b"])
        ledger.prioritize({"a": 5, "b": -2})
        assert (ledger.priority("a"), ledger.priority("b")) == (5, -2)
        assert ledger.row("a").priority == 5
        ledger.prioritize({"a": 0})
        assert ledger.priority("a") == 0 and ledger.row("a").priority == 0

    def test_counts_and_rows_say_what_the_states_say(self, subject):
        ledger = subject.ledger
        ledger.see(["p", "r", "s", "f", "c"])
        for name in "rsfc":
            subject.start(name)
        subject.finish("s", True, 0, None)
        subject.finish("f", False, 2, "exit code 2")
        ledger.cancel("c")
        assert ledger.counts() == {"pending": 1, "running": 1, "succeeded": 1, "failed": 1,
                                   "cancelled": 1}  # fmt: skip
        assert [r.name for r in ledger.rows()] == ["c", "f", "p", "r", "s"]
        assert [r.name for r in ledger.rows(State.FAILED.value)] == ["f"]
        assert {r.name: (r.state, r.attempts) for r in ledger.rows()} == {
            n: ledger.state(n) for n in "pfrsc"
        }

    def test_an_ordinary_failure_is_not_given_up(self, subject):
        ledger = subject.ledger
        ledger.see(["a"])
        subject.start("a")
        subject.finish("a", False, 1, "exit code 1")
        assert ledger.gave_up("a") is False

    def test_what_was_recorded_outlives_its_manager_and_a_run_it_left_is_taken_back(self, subject):
        """History and take-back: the next manager's ledger (the same record, reopened) says what
        each finished item ended as - attempt, exit code, error, the version it ran at, priority -
        and an item left running can be put back in line with its attempt given back (no work was
        started for it) or be given the end that came while no manager ran."""
        ledger = subject.ledger
        ledger.see(["ok", "bad", "gone", "ended", "later"])
        ledger.prioritize({"later": 5})
        subject.start("ok", "v1")
        subject.finish("ok", True, 0, None)
        subject.start("bad")
        subject.finish("bad", False, 3, "exit code 3")
        subject.start("gone")
        subject.start("ended")
        before = {r.name: r for r in ledger.rows()}

        subject.reopen()
        ledger = subject.ledger
        kept = ("ok", "bad", "later") if subject.keeps_unfinished_items else ("ok", "bad")
        for name in kept:
            row, was = ledger.row(name), before[name]
            assert (row.state, row.attempts, row.priority) == (
                was.state, was.attempts, was.priority), name  # fmt: skip
            if subject.keeps_exit_details:  # the cluster's record does not (docs/architecture.md)
                assert (row.exit_code, row.last_error) == (was.exit_code, was.last_error), name
        assert ledger.version_ran("ok") == "v1"
        if not subject.keeps_unfinished_items:  # the cluster: what ran and ended is never new
            assert ledger.see(["ok", "bad", "gone", "ended", "later"]) == ["gone", "ended", "later"]
            return  # what waits the source lists again, what runs its Job says
        assert ledger.priority("later") == 5
        assert ledger.see(["ok", "bad", "gone", "ended", "later"]) == []  # nothing is new again

        ledger.requeue("gone")  # its work never started: back in line, the attempt not counted
        assert ledger.state("gone") == ("pending", 0)
        subject.finish("ended", True, 0, None)  # its work ended while no manager ran
        assert ledger.state("ended") == ("succeeded", 1)
        assert subject.start("gone") == 1  # and it runs, as its first attempt
