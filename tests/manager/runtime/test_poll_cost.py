"""What a poll costs, as counts rather than timings: the ledger lookups a listing makes per
name (one), and the source requests that bring a backlog's data (a page per `DATA_PAGE`
items, no GET per item) or a trickle's (a GET each after one page of little use), over a real
ambassador on 127.0.0.1."""

from __future__ import annotations

import os
import time

from kube_workqueue.manager.planning.measure import SlidingWindow
from kube_workqueue.manager.ports import State
from kube_workqueue.manager.runtime.intake import Intake
from kube_workqueue.manager.sources.held_data import DATA_PAGE
from kube_workqueue.manager.sources.http import SourceClient
from kube_workqueue.manager.workqueue.queue import Queue
from tests.manager.fakes import FakeLedger, FakeSource
from tests.support.in_process_ambassador import in_process_ambassador_server  # noqa: F401  (fixture)


class CountingLedger(FakeLedger):
    """Counts the calls of each lookup a listing may make."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: dict[str, int] = {}
        for method in ("state", "see", "rerun", "gave_up"):
            setattr(self, method, self._counted(method, getattr(self, method)))

    def _counted(self, method, call):
        def counted(*args, **kwargs):
            self.calls[method] = self.calls.get(method, 0) + 1
            return call(*args, **kwargs)

        return counted


def test_a_listing_costs_one_ledger_lookup_a_name():
    names = [f"{i:05d}.x" for i in range(10_000)]
    ledger = CountingLedger()
    ledger.see(names[:9_990])
    for name in names[:9_980]:
        ledger.items[name].update(state=State.SUCCEEDED.value, attempts=1)
    for name in names[9_980:9_990]:  # cancelled, listed again: work again
        ledger.items[name].update(state=State.CANCELLED.value, attempts=1)

    def rerun(name, version):  # as a ledger does for a cancelled item listed again
        ledger.items[name].update(state=State.PENDING.value, attempts=0)
        return True

    ledger.rerun = ledger._counted("rerun", rerun)
    ledger.calls.clear()
    line = Queue()

    def needs_work(name, current):
        return current is None or current[0] == State.PENDING.value

    intake = Intake(ledger, FakeSource({}), line, SlidingWindow(60, time.time), needs_work)
    intake.listed(names)
    assert len(line) == 20  # ten new, ten back from cancelled
    assert ledger.calls["see"] == 1 and ledger.calls["rerun"] == 10
    assert ledger.calls["state"] == len(names) + 10  # one a name, and one after each revival


def folder_of(path, count: int):
    path.mkdir()
    for i in range(count):
        (path / f"{i:05d}.x").touch()
        os.utime(path / f"{i:05d}.x", (1_000_000_000, 1_000_000_000))
    return path


def test_a_backlog_brings_its_data_a_page_at_a_time(tmp_path, ambassador_server):
    server = ambassador_server(folder_of(tmp_path / "items", 3_000), "--suffix", ".x")
    client = SourceClient(server.url)
    client.keep_data_of(lambda name: True)
    names = client.list_items()
    assert len(names) == 3_000 and client.requests == {"list": 1, "item": 0}
    for name in names:  # the line's order: the listing's
        assert client.get_item(name)["name"] == name
    assert client.held.pages == 3_000 // DATA_PAGE and client.requests["item"] == 0
    assert len(client.held) == 0


def test_a_trickle_among_finished_items_costs_a_get_each(tmp_path, ambassador_server):
    server = ambassador_server(folder_of(tmp_path / "items", 3_000), "--suffix", ".x")
    client = SourceClient(server.url)
    new = [f"{i:05d}.x" for i in range(0, 3_000, 600)]  # five new, more than a page apart
    client.keep_data_of(set(new).__contains__)
    client.listed_work(len(new))  # fewer than a bulk
    client.list_items()
    for name in new:
        assert client.get_item(name)["name"] == name
    assert client.held.pages == 1  # one page, of little use: then a GET each
    assert client.requests["item"] == len(new) - 1
