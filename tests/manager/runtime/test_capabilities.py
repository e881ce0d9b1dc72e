"""Capabilities are declared (`manager.ports`: `RunsBatches`, `KeepsLiveRows`), not guessed from
an attribute: the backends and ledgers that have them say so, and the dispatcher picks batches
only for a backend that can run them."""

from __future__ import annotations

import threading

from kube_workqueue.manager.backends.kubernetes.dispatch.backend import KubernetesBackend
from kube_workqueue.manager.backends.kubernetes.manifests import objects as ko
from kube_workqueue.manager.backends.kubernetes.records.ledger import ClusterLedger
from kube_workqueue.manager.backends.local.ledger import SqliteLedger
from kube_workqueue.manager.ports import KeepsLiveRows, RunsBatches
from kube_workqueue.manager.runtime.batching import BatchDispatcher
from kube_workqueue.manager.runtime.dispatcher import Dispatcher, dispatcher_for


class Cache:
    changed = threading.Condition()

    def get(self, name):
        return None


def kubernetes_backend(batch_size: int) -> KubernetesBackend:
    return KubernetesBackend(None, "q", ko.PodOptions(image="x"), Cache(), None,
                             batch_size=batch_size)  # fmt: skip


class OneAtATime:
    """A backend with a batch size but nothing to run a batch with: not a batch runner."""

    batch_size = 8


def test_the_cluster_backend_and_record_declare_what_they_can_do():
    assert isinstance(kubernetes_backend(4), RunsBatches)
    assert not isinstance(OneAtATime(), RunsBatches)
    assert issubclass(ClusterLedger, KeepsLiveRows)
    assert not issubclass(SqliteLedger, KeepsLiveRows)  # its status is built from every row


def test_batches_are_formed_only_for_a_backend_that_runs_them(monkeypatch):
    picked = {}
    for label, backend in [("batches", kubernetes_backend(4)), ("single", kubernetes_backend(1)),
                           ("guessing", OneAtATime())]:  # fmt: skip
        monkeypatch.setattr(BatchDispatcher, "__init__", lambda self, *a, **k: None)
        monkeypatch.setattr(Dispatcher, "__init__", lambda self, *a, **k: None)
        picked[label] = type(dispatcher_for(backend, None, None, None, None, workers=1))
    assert picked == {"batches": BatchDispatcher, "single": Dispatcher, "guessing": Dispatcher}


class BatchRecorder:
    """A reconciler that begins every item and runs each batch at once, noting its members."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    def begin(self, name):
        from kube_workqueue.manager.ports import Cancel
        from kube_workqueue.manager.runtime.reconciler import Started

        return Started(name, {}, 1, Cancel())

    def finish_batch(self, batch, done) -> None:
        self.batches.append([s.name for s in batch])
        for started in batch:
            done(started, None, None)


def test_batches_are_formed_from_the_head_of_a_priority_line():
    from kube_workqueue.manager.runtime.capacity import Capacity
    from kube_workqueue.manager.workqueue import Queue
    from kube_workqueue.manager.workqueue.ordering import ByPriority

    priority = {"c": 5, "e": 5, "b": 1}
    line = Queue(order=ByPriority(lambda k: priority.get(k, 0)))
    for name in "abcdef":
        line.add(name)
    capacity, recorder, settled = Capacity(2), BatchRecorder(), []

    def settle(name, result, error):
        settled.append(name)
        line.done(name)

    former = BatchDispatcher(line, capacity, recorder, settle, batch_size=2,
                             item_bytes=lambda *a: 1, room=100, wait=0.5).start()  # fmt: skip
    deadline = threading.Event()
    for _ in range(400):  # (a condition, not a sleep: every item settled)
        if len(settled) == 6:
            break
        deadline.wait(0.05)
    line.shut_down()
    capacity.close()
    former.join()
    assert [n for batch in recorder.batches for n in batch] == ["c", "e", "b", "a", "d", "f"]
    assert all(len(batch) <= 2 for batch in recorder.batches)


class LaggingRecord(BatchRecorder):
    """Each batch's members are reported at once (their slots free), but its thread waits for
    its record until the test lets it go - as batches wait for records behind the limiter."""

    def __init__(self) -> None:
        super().__init__()
        self.recorded = threading.Semaphore(0)

    def finish_batch(self, batch, done) -> None:
        self.batches.append([s.name for s in batch])
        for started in batch:
            done(started, None, None)
        self.recorded.acquire()


def test_batches_waiting_for_their_record_hold_the_line_back_not_memory():
    from kube_workqueue.manager.runtime import batching
    from kube_workqueue.manager.runtime.capacity import Capacity
    from kube_workqueue.manager.workqueue import Queue
    from tests.support.servers import wait_until

    line = Queue()
    for i in range(40):
        line.add(f"item-{i:02d}")
    capacity, recorder = Capacity(4), LaggingRecord()
    former = BatchDispatcher(line, capacity, recorder, lambda n, r, e: line.done(n),
                             batch_size=2, item_bytes=lambda *a: 1, room=100,
                             wait=0.01).start()  # fmt: skip
    most = batching.MOST_BATCHES_PER_SLOTS * 2  # the parallelism fills two batches of two
    wait_until(lambda: len(recorder.batches) == most)
    assert capacity.in_use == 0 and former._unended == most  # every slot free, and yet:
    assert len(line) == 40 - 2 * most  # the rest waits in line while no batch has ended
    for _ in range(40):
        recorder.recorded.release()  # the records come: the line flows again
    wait_until(lambda: len(line) == 0 and former._unended == 0)
    assert sum(len(b) for b in recorder.batches) == 40
    line.shut_down()
    capacity.close()
    former.join()
