"""The dispatcher takes a capacity slot before it takes an item, so items start in the order
they were queued whatever the number of workers, never more at once than the slots, and a
held capacity keeps every item in line (none taken and held by a waiting worker)."""

from __future__ import annotations

import threading
import time

from kube_workqueue.manager.ports import Outcome
from kube_workqueue.manager.runtime.capacity import Capacity
from kube_workqueue.manager.runtime.dispatcher import Dispatcher
from kube_workqueue.manager.runtime.reconciler import Reconciler
from kube_workqueue.manager.workqueue import RateLimitingQueue
from tests.support.servers import wait_until

from ..fakes import FakeBackend, FakeLedger, FakeSource


class SlowBackend(FakeBackend):
    """Each run takes a moment; remembers the most runs at once."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 0
        self.most = 0
        self.lock = threading.Lock()

    def run(self, name, data, attempt, cancel=None):
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
        time.sleep(0.01)
        with self.lock:
            self.now -= 1
        return super().run(name, data, attempt, cancel)


def dispatcher(names, slots, workers, paused=None):
    ledger, backend = FakeLedger(), SlowBackend()
    backend.ledger = ledger
    source = FakeSource({n: {"name": n} for n in names})
    capacity = Capacity(slots, paused=paused)
    reconciler = Reconciler(ledger, source, backend, capacity)
    line = RateLimitingQueue("items")
    settled = []

    def settle(name, result, error):
        settled.append((name, result, error))
        line.forget(name)
        line.done(name)

    d = Dispatcher(line, capacity, reconciler, settle, workers=workers).start()
    return d, line, capacity, backend, settled


def stop(d, line, capacity):
    line.shut_down()
    capacity.close()
    d.join()


def test_items_start_in_line_order_with_more_workers_than_slots():
    names = [f"{(k * 37) % 100:02d}-{k}" for k in range(30)]  # queued in this order
    for slots in (1, 2):
        d, line, capacity, backend, settled = dispatcher(names, slots=slots, workers=8)
        for name in names:
            line.add(name)
        wait_until(lambda: len(settled) == 30, timeout=30)  # noqa: B023
        stop(d, line, capacity)
        starts = [n for n, state in backend.ledger.transitions if state == "running"]
        assert starts == names  # recorded started in line order, whatever the slots
        if slots == 1:  # one at a time: the work itself too
            assert [n for n, _, _ in backend.runs] == names
        assert backend.most <= slots and all(e is None for _, _, e in settled)


def test_a_held_capacity_takes_nothing_out_of_line():
    held = threading.Event()
    held.set()
    d, line, capacity, backend, settled = dispatcher(
        ["a", "b", "c"], slots=1, workers=4, paused=held.is_set
    )
    for name in ("a", "b", "c"):
        line.add(name)
    time.sleep(0.2)  # the dispatcher waits on the capacity: nothing may be taken meanwhile
    assert len(line) == 3 and backend.runs == [] and line.processing_count() == 0
    held.clear()
    capacity.poke()
    wait_until(lambda: len(settled) == 3, timeout=10)
    stop(d, line, capacity)
    assert [n for n, _, _ in backend.runs] == ["a", "b", "c"]


def test_a_failing_fetch_gives_the_slot_back_and_is_settled_with_its_error():
    d, line, capacity, backend, settled = dispatcher(["a"], slots=1, workers=2)
    boom = RuntimeError("the source is down")
    d.reconciler.source.get_item = lambda name: (_ for _ in ()).throw(boom)
    line.add("a")
    wait_until(lambda: settled, timeout=10)
    stop(d, line, capacity)
    assert settled == [("a", None, boom)] and capacity.in_use == 0 and backend.runs == []


def test_outcomes_are_settled_per_item():
    d, line, capacity, backend, settled = dispatcher(["ok", "bad"], slots=1, workers=2)
    backend.script["bad"] = [Outcome(False, exit_code=3, error="exit code 3")]
    line.add("ok")
    line.add("bad")
    wait_until(lambda: len(settled) == 2, timeout=10)
    stop(d, line, capacity)
    assert {n: str(r) for n, r, _ in settled} == {"ok": "succeeded", "bad": "retry"}
