"""Never two runs of one queue: a run whose manager does not stop in its grace is fenced -
nothing of it writes any more - before `stop()` returns and the next run may start."""

from __future__ import annotations

import threading
from types import SimpleNamespace

from kube_workqueue.manager import assembly
from kube_workqueue.manager.operator.queue_runner import QueueRun


class StuckManager:
    """A manager whose loop ignores stop() (a thread stuck in a call that never returns)."""

    elector = None

    def __init__(self) -> None:
        self.running = threading.Event()
        self.unstick = threading.Event()

    def lead(self) -> bool:
        return True

    def stop(self) -> None:
        pass  # heard, and ignored: it is stuck

    def run_forever(self) -> None:
        self.running.set()
        self.unstick.wait(60)


def test_a_run_that_does_not_stop_is_fenced_before_stop_returns(monkeypatch):
    manager, fences, closed = StuckManager(), [], []
    built = SimpleNamespace(manager=manager, close=lambda: closed.append(True),
                            fence=lambda timeout: fences.append(timeout) or True)  # fmt: skip
    monkeypatch.setattr(assembly, "assemble", lambda *args, **kw: built)
    plan = SimpleNamespace(namespace="media", name="q", kube=None, source_url="http://x",
                           manager=None)  # fmt: skip
    states = []
    run = QueueRun(plan, lambda state, reason, message: states.append(state)).start()
    assert manager.running.wait(30)
    run.stop(timeout=0.2)
    assert fences and run.abandoned  # fenced before stop() returned
    assert run.alive  # its thread still runs - and can write nothing
    manager.unstick.set()
    run.join(30)
    assert not run.alive and closed == [True]
    assert states.count("Starting") == 1  # stopped: never started again


def test_a_run_that_stops_in_time_is_not_fenced(monkeypatch):
    manager, fences = StuckManager(), []
    manager.stop = manager.unstick.set  # this one listens
    built = SimpleNamespace(manager=manager, close=lambda: None,
                            fence=lambda timeout: fences.append(timeout) or True)  # fmt: skip
    monkeypatch.setattr(assembly, "assemble", lambda *args, **kw: built)
    plan = SimpleNamespace(namespace="media", name="q", kube=None, source_url="http://x",
                           manager=None)  # fmt: skip
    run = QueueRun(plan, lambda *a: None).start()
    assert manager.running.wait(30)
    run.stop(timeout=30)
    assert not run.alive and not fences and not run.abandoned
