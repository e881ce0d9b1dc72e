"""The reconciler over fakes of its ports: what it decides, in what order it records, and how
the retry policy bounds an item's attempts."""

from __future__ import annotations

from kube_workqueue.manager.ports import Outcome
from kube_workqueue.manager.retry import RetryPolicy
from kube_workqueue.manager.runtime.capacity import Capacity
from kube_workqueue.manager.runtime.reconciler import Reconciler, Result

from ..fakes import FakeBackend, FakeLedger, FakeSource


def reconciler(items, script=None, *, max_attempts=3, limit=1):
    ledger, source, backend = FakeLedger(), FakeSource(items), FakeBackend(script)
    capacity = Capacity(limit)
    rec = Reconciler(
        ledger, source, backend, capacity, policy=RetryPolicy(max_attempts=max_attempts)
    )
    return rec, ledger, source, backend, capacity


def test_a_new_item_is_fetched_recorded_running_then_succeeded():
    rec, ledger, source, backend, capacity = reconciler({"a": {"n": 1}})
    assert rec.reconcile("a") == Result.SUCCEEDED
    assert backend.runs == [("a", {"n": 1}, 1)]
    assert ledger.transitions == [("a", "running"), ("a", "succeeded")]
    assert capacity.in_use == 0  # the slot went back


def test_succeeded_and_running_items_are_skipped_without_a_fetch():
    rec, ledger, source, backend, _ = reconciler({"a": {}, "b": {}})
    rec.reconcile("a")
    ledger.see(["b"])
    ledger.start("b", "log/b")
    source.fetched.clear()
    assert rec.reconcile("a") == Result.SKIPPED
    assert rec.reconcile("b") == Result.SKIPPED
    assert source.fetched == [] and len(backend.runs) == 1


def test_an_item_gone_from_the_source_is_not_started():
    rec, ledger, _, backend, capacity = reconciler({})
    assert rec.reconcile("ghost") == Result.GONE
    assert backend.runs == [] and ledger.transitions == [] and capacity.in_use == 0


def test_failures_retry_until_the_policy_gives_up():
    fail = Outcome(False, exit_code=1, error="exit code 1")
    rec, ledger, _, backend, _ = reconciler({"a": {}}, {"a": [fail, fail, fail]}, max_attempts=2)
    assert rec.reconcile("a") == Result.RETRY
    assert rec.reconcile("a") == Result.FAILED
    assert rec.reconcile("a") == Result.SKIPPED  # out of attempts: stays failed
    assert [attempt for _, _, attempt in backend.runs] == [1, 2]
    assert ledger.state("a") == ("failed", 2)


def test_an_interrupted_run_goes_back_to_pending_without_counting():
    stopped = Outcome(False, interrupted=True)
    rec, ledger, _, _, _ = reconciler({"a": {}}, {"a": [stopped]})
    assert rec.reconcile("a") == Result.STOPPED
    assert ledger.state("a") == ("pending", 0)


def test_a_backend_that_raises_fails_the_attempt_and_leaves_nothing_running():
    rec, ledger, _, _, capacity = reconciler({"a": {}}, {"a": [RuntimeError("boom")]})
    assert rec.reconcile("a") == Result.RETRY
    assert ledger.state("a") == ("failed", 1)
    assert "boom" in ledger.items["a"]["error"] and capacity.in_use == 0


def test_a_closed_capacity_starts_nothing():
    rec, ledger, source, backend, capacity = reconciler({"a": {}})
    capacity.close()
    assert rec.reconcile("a") == Result.STOPPED
    assert source.fetched == [] and backend.runs == [] and ledger.transitions == []


def test_capacity_is_taken_before_the_fetch():
    order = []
    rec, _, source, _, capacity = reconciler({"a": {}})
    real_acquire, real_get = capacity.acquire, source.get_item
    capacity.acquire = lambda: order.append("slot") or real_acquire()
    source.get_item = lambda name: order.append("fetch") or real_get(name)
    rec.reconcile("a")
    assert order == ["slot", "fetch"]


def test_a_final_failure_is_not_retried_and_needs_no_more_work():
    """Outcome.final (an exit code listed as final): failed for good at once, attempts left or
    not; and an item the ledger says gave up needs no work on later polls."""
    from kube_workqueue.manager.ports import Outcome
    from kube_workqueue.manager.retry import RetryPolicy
    from kube_workqueue.manager.runtime.reconciler import Reconciler, Result

    from ..fakes import FakeLedger

    ledger = FakeLedger()

    class Client:
        def get_item(self, name):
            return {"name": name}

    class FinalBackend:
        def log_path(self, name):
            return "-"

        def run(self, name, data, attempt, cancel=None):
            return Outcome(False, exit_code=2, error="exit code 2 listed", final=True)

    from kube_workqueue.manager.runtime.capacity import Capacity

    reconciler = Reconciler(
        ledger, Client(), FinalBackend(), Capacity(1), policy=RetryPolicy(max_attempts=3)
    )
    assert reconciler.reconcile("a") == Result.FAILED
    assert ledger.state("a") == ("failed", 1)
    assert reconciler.needs_work("a")  # the fake keeps no finality by itself...
    ledger.items["a"]["final"] = True  # ...a backend's ledger does (the Kubernetes record)
    assert not reconciler.needs_work("a")
