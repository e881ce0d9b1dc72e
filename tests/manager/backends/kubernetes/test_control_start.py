"""A manager knows whether its queue is paused before it may dispatch: the pause's cache (the
control ConfigMap's, or the WorkQueue's) has listed once when `start()` returns, and a list
that never comes is one line, not a manager that runs a paused queue's items (it did, when its
start was slow: the cache thread had not listed yet)."""

from __future__ import annotations

import threading

import pytest

from kube_workqueue.manager.backends.kubernetes.client.cache import ClusterCache
from kube_workqueue.manager.backends.kubernetes.steering import control, queue_resource
from kube_workqueue.manager.errors import UserError


class SlowCache:
    """A cache whose first list comes `delay` seconds after start (None: never)."""

    delay: float | None = 0.3

    def __init__(self, *args, **kwargs) -> None:
        self.synced = threading.Event()
        self.stopped = False

    def start(self):
        if self.delay is not None:
            threading.Timer(self.delay, self.synced.set).start()
        return self

    def stop(self) -> None:
        self.stopped = True

    start_listed = ClusterCache.start_listed  # the real wait, over this cache's list

    def get(self, name):
        assert self.synced.is_set(), "read before the first list"
        return {"data": {"paused_since": "1700000000"}}


@pytest.fixture
def slow(monkeypatch):
    monkeypatch.setattr(control, "ClusterCache", SlowCache)
    monkeypatch.setattr(queue_resource, "ClusterCache", SlowCache)
    monkeypatch.setattr(queue_resource, "ensure", lambda *a: None)
    monkeypatch.setattr(SlowCache, "delay", 0.3)
    return SlowCache


def test_the_control_configmap_is_listed_before_start_returns(slow):
    queue = control.Control(None, "thumbs").start()
    assert queue.paused_since() == 1700000000.0


def test_the_workqueue_is_listed_before_start_returns(slow):
    queue = queue_resource.QueueResource(None, "thumbs", 2, dict).start()
    assert queue.cache.synced.is_set()


@pytest.mark.parametrize("make", [
    lambda: control.Control(None, "thumbs"),
    lambda: queue_resource.QueueResource(None, "thumbs", 2, dict),
], ids=["control", "workqueue"])  # fmt: skip
def test_a_list_that_never_comes_is_one_line(slow, make):
    slow.delay = None
    pausing = make()
    with pytest.raises(UserError, match="cannot read"):
        pausing.start(timeout=0.2)
    assert pausing.cache.stopped
