"""Capabilities are declared (`manager.ports`: `RunsBatches`, `KeepsLiveRows`), not guessed from
an attribute: the backends and ledgers that have them say so, and the dispatcher picks batches
only for a backend that can run them."""

from __future__ import annotations

import threading

from manager.backends.kubernetes.dispatch.backend import KubernetesBackend
from manager.backends.kubernetes.manifests import objects as ko
from manager.backends.kubernetes.records.ledger import ClusterLedger
from manager.backends.local.ledger import SqliteLedger
from manager.ports import KeepsLiveRows, RunsBatches
from manager.runtime.batching import BatchDispatcher
from manager.runtime.dispatcher import Dispatcher, dispatcher_for


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
