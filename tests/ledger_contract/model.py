"""The ledgers against a model of the item's life: Hypothesis drives random sequences of
sightings, starts, ends, requeues, cancels, re-runs and priorities, and after every step each
ledger must say what the model says - every item's (state, attempts), priority and version,
and the counts (what this example added to them). The model is the rules as the port states
them (`manager.ports.Ledger`)."""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kube_workqueue.manager.ports import FINISHED, State

MAX_ATTEMPTS = 3  # a manager starts a failed item again only while it has attempts left
LETTERS = "abcd"


class Model:
    """What the rules say each item is: name -> [state, attempts, priority, version]."""

    def __init__(self) -> None:
        self.items: dict[str, list] = {}

    def startable(self, name: str) -> bool:
        item = self.items.get(name)
        return item is not None and (
            item[0] == State.PENDING or (item[0] == State.FAILED and item[1] < MAX_ATTEMPTS)
        )


def machine_for(subject):
    """A state machine over `subject` (one ledger for every example: each example names its
    items afresh, and the model spans them all, so counts still compare whole)."""
    ledger, model, examples = subject.ledger, Model(), itertools.count()

    class LedgerMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.prefix = f"e{next(examples)}-"
            self.counts_before = ledger.counts()  # (earlier examples' items stay)

        def name(self, letter: str) -> str:
            return self.prefix + letter

        @rule(letters=st.lists(st.sampled_from(LETTERS), max_size=3))
        def see(self, letters):
            names = list(dict.fromkeys(self.name(x) for x in letters))
            expected = [n for n in names if n not in model.items]
            assert ledger.see(names) == expected
            for name in expected:
                model.items[name] = [State.PENDING, 0, 0, None]

        @rule(letter=st.sampled_from(LETTERS), version=st.sampled_from([None, "v1", "v2"]))
        def start(self, letter, version):
            name = self.name(letter)
            if not model.startable(name):
                return
            item = model.items[name]
            assert subject.start(name, version) == item[1] + 1
            item[:2] = [State.RUNNING, item[1] + 1]
            item[3] = version

        @rule(letter=st.sampled_from(LETTERS), succeeded=st.booleans())
        def finish(self, letter, succeeded):
            name = self.name(letter)
            item = model.items.get(name)
            if item is None or item[0] != State.RUNNING:
                return
            subject.finish(name, succeeded, 0 if succeeded else 1, None if succeeded else "x")
            item[0] = State.SUCCEEDED if succeeded else State.FAILED

        @rule(letter=st.sampled_from(LETTERS))
        def requeue(self, letter):
            name = self.name(letter)
            item = model.items.get(name)
            if item is None or item[0] != State.RUNNING:
                return
            ledger.requeue(name)
            item[:2] = [State.PENDING, max(0, item[1] - 1)]

        @rule(letter=st.sampled_from(LETTERS))
        def cancel(self, letter):
            name = self.name(letter)
            item = model.items.get(name)
            allowed = item is not None and item[0] in (State.PENDING, State.RUNNING,
                                                       State.FAILED)  # fmt: skip
            assert ledger.cancel(name) is allowed
            if allowed:
                item[0] = State.CANCELLED

        @rule(letter=st.sampled_from(LETTERS), version=st.sampled_from(["v1", "v2", "v3"]))
        def rerun(self, letter, version):
            name = self.name(letter)
            item = model.items.get(name)
            allowed = item is not None and item[0] in FINISHED
            assert ledger.rerun(name, version) is allowed
            if allowed:
                item[:2] = [State.PENDING, 0]

        # (this example's own items: the model spans every example, so a precondition on it
        # whole would differ when Hypothesis replays an example - FlakyStrategyDefinition)
        @precondition(lambda self: any(name.startswith(self.prefix) for name in model.items))
        @rule(letter=st.sampled_from(LETTERS), priority=st.integers(-3, 3))
        def prioritize(self, letter, priority):
            name = self.name(letter)
            if name in model.items:
                ledger.prioritize({name: priority})
                model.items[name][2] = priority

        @invariant()
        def says_what_the_model_says(self):
            for name, (state, attempts, priority, version) in model.items.items():
                if not name.startswith(self.prefix):
                    continue
                assert ledger.state(name) == (state.value, attempts), name
                assert ledger.priority(name) == priority, name
                if state == State.RUNNING:
                    assert ledger.version_ran(name) == version, name
                row = ledger.row(name)
                assert (row.state, row.attempts, row.priority) == (state.value, attempts,
                                                                   priority), name  # fmt: skip

        def teardown(self):
            counts = dict(self.counts_before)
            for name, (state, *_) in model.items.items():
                if name.startswith(self.prefix):
                    counts[state.value] += 1
            assert ledger.counts() == counts

    return LedgerMachine


class FollowsTheModel:
    """Random sequences of the item's life, against the model."""

    def test_the_ledger_follows_the_model(self, subject):
        machine = machine_for(subject)
        machine.TestCase.settings = settings(
            max_examples=25, stateful_step_count=25, deadline=None, database=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
        )  # fmt: skip
        machine.TestCase().runTest()
