"""Every cancel in one place: an item that left the source is cancelled before it starts, its
run asked to end (its `Cancel` set) when it runs here, or its work ended elsewhere."""

from __future__ import annotations

from kube_workqueue.manager.ports import State
from kube_workqueue.manager.runtime.cancellation import Cancellations

from ..fakes import FakeBackend, FakeLedger


class Elsewhere(FakeBackend):
    def __init__(self) -> None:
        super().__init__()
        self.ended: list[str] = []

    def cancel_elsewhere(self, name):
        self.ended.append(name)
        return True


def ledger_with(**states) -> FakeLedger:
    ledger = FakeLedger()
    for name, state in states.items():
        ledger.items[name] = {"state": state, "attempts": 1, "error": None}
    return ledger


def cancel_of(ledger):
    def cancel(name):
        item = ledger.items.get(name)
        if item is None or item["state"] in ("succeeded", "cancelled"):
            return False
        item["state"] = "cancelled"
        return True

    return cancel


def test_pending_is_cancelled_running_here_is_asked_to_end_elsewhere_is_ended():
    ledger = ledger_with(wait="pending", mine="running", theirs="running", done="succeeded")
    ledger.cancel = cancel_of(ledger)
    backend = Elsewhere()
    cancellations = Cancellations(ledger, backend)
    with cancellations.gate:
        mine = cancellations.started("mine")
    ended = cancellations.removed(["wait", "mine", "theirs", "done", "unknown"], lambda n: True)
    assert sorted(ended) == ["theirs", "wait"]
    assert mine.is_set() and ledger.items["mine"]["state"] == State.RUNNING  # its run records it
    assert backend.ended == ["theirs"] and ledger.items["done"]["state"] == "succeeded"


def test_a_cancel_that_comes_before_the_backend_took_the_run_is_seen_when_it_does():
    ledger = ledger_with(a="running")
    ledger.cancel = cancel_of(ledger)
    backend = Elsewhere()
    cancellations = Cancellations(ledger, backend)
    with cancellations.gate:
        cancel = cancellations.started("a")
    cancellations.removed(["a"], lambda n: True)
    called = []
    cancel.on_set(lambda: called.append("ended"))  # the backend subscribes only now
    assert called == ["ended"] and backend.ended == []  # its run here ends it
    cancellations.ended("a")
    cancellations.removed(["a"], lambda n: True)  # no run of it here any more:
    assert backend.ended == ["a"] and ledger.items["a"]["state"] == "cancelled"  # ended there
