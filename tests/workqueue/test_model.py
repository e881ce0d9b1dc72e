"""Queue against a tiny reference model over random add/get/done/shut-down sequences."""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kube_workqueue.manager.workqueue import Queue

KEYS = st.sampled_from(["a", "b", "c", "d"])


class QueueModel(RuleBasedStateMachine):
    """The model says, in the plainest terms: waiting keys in first-add order, each once; held
    keys; held keys re-added meanwhile; adds ignored after shut-down."""

    def __init__(self) -> None:
        super().__init__()
        self.queue = Queue()
        self.waiting: list[str] = []
        self.held: set[str] = set()
        self.readded: set[str] = set()
        self.shut = False

    @rule(key=KEYS)
    def add(self, key):
        self.queue.add(key)
        if self.shut:
            return
        if key in self.held:
            self.readded.add(key)
        elif key not in self.waiting:
            self.waiting.append(key)

    @precondition(lambda self: self.waiting or self.shut)
    @rule()
    def get(self):
        key, shutdown = self.queue.get()
        if not self.waiting:
            assert (key, shutdown) == (None, True)
            return
        expected = self.waiting.pop(0)
        assert (key, shutdown) == (expected, False)
        assert key not in self.held, "one worker per key"
        self.held.add(key)

    @precondition(lambda self: self.held)
    @rule(data=st.data())
    def done(self, data):
        key = data.draw(st.sampled_from(sorted(self.held)))
        self.queue.done(key)
        self.held.discard(key)
        if key in self.readded:
            self.readded.discard(key)
            self.waiting.append(key)

    @rule()
    def shut_down(self):
        self.queue.shut_down()
        self.shut = True

    @invariant()
    def lengths_agree(self):
        assert len(self.queue) == len(self.waiting)
        assert self.queue.processing_count() == len(self.held)
        assert self.queue.dirty_count() == len(self.waiting) + len(self.readded)


TestQueueModel = QueueModel.TestCase
TestQueueModel.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
