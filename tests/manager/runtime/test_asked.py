"""Asked: what is asked of a queue is followed, and the status answering it goes out at once."""

from __future__ import annotations

import threading
from types import SimpleNamespace

from kube_workqueue.manager.runtime.asked import Asked
from kube_workqueue.manager.runtime.manager_options import ManagerOptions


def _manager(paused_from: int, wanted_from: int | None, stop_after: int):
    """A manager whose ledger says the queue is paused from its `paused_from`-th read on (and
    asks for parallelism 4 from read `wanted_from`), and which stops at read `stop_after`."""

    class Ledger:
        reads = 0

        def paused_since(self):
            self.reads += 1
            if self.reads >= stop_after:
                manager.stop_event.set()
            return 100.0 if self.reads >= paused_from else None

        def wanted_parallelism(self):
            return 4 if wanted_from is not None and self.reads >= wanted_from else None

        def wanted_group_rules(self):
            return None

    manager = SimpleNamespace(
        ledger=Ledger(),
        stop_event=threading.Event(),
        paused_since=None,
        capacity=SimpleNamespace(poke=lambda: None, limit=2),
        autoscaler=None,
        options=ManagerOptions(),
        intake=SimpleNamespace(taken_once=True),  # (a listing recorded: a status is due)
    )

    def set_parallelism(parallelism: int) -> None:
        manager.capacity.limit = parallelism

    manager.apply_parallelism = set_parallelism
    return manager


def _reports(manager) -> list[int]:
    """The ledger reads at which `follow` handed over the status."""
    asked = Asked(manager)
    reports: list[int] = []
    asked.report = lambda: reports.append(manager.ledger.reads)
    asked.follow(interval=0.001)
    return reports


def test_a_pause_is_answered_at_once_not_at_the_next_period():
    # read 1: the first status; read 3: paused - answered then, not STATUS_SECONDS later
    assert _reports(_manager(paused_from=3, wanted_from=None, stop_after=6)) == [1, 3]


def test_a_new_parallelism_is_answered_at_once():
    manager = _manager(paused_from=99, wanted_from=4, stop_after=7)
    assert _reports(manager) == [1, 4]
    assert manager.capacity.limit == 4


def test_nothing_asked_nothing_reported_before_the_period():
    assert _reports(_manager(paused_from=99, wanted_from=None, stop_after=8)) == [1]


def test_a_ledger_that_keeps_no_status_never_has_one_built():
    """The local ledger: `workqueue status` reads it itself, so the view over every item the
    status is made of would be built every few seconds for nothing."""
    for keeps in (False, True):
        built: list[bool] = []
        reported: list = []
        ledger = SimpleNamespace(keeps_status=keeps, report=reported.append)
        asked = Asked(SimpleNamespace(ledger=ledger))
        asked.status_report = lambda b=built: b.append(True) or {"counts": {}}
        asked.report()
        assert built == ([True] if keeps else [])
        assert reported == ([{"counts": {}}] if keeps else [])


def test_a_status_goes_out_at_once_and_again_when_the_first_listing_is_recorded():
    """A manager just started (an operator restarted) says its status at once - its conditions
    (a source that is down) are news - though it knows no count yet (`status_report` leaves
    them out, so the WorkQueue keeps the ones it had); the first counts go out as soon as a
    listing is recorded (read 3), not a period later."""
    manager = _manager(paused_from=99, wanted_from=None, stop_after=8)
    manager.intake.taken_once = False
    read = manager.ledger.paused_since

    def paused_since():
        found = read()
        manager.intake.taken_once = manager.ledger.reads >= 3
        return found

    manager.ledger.paused_since = paused_since
    assert _reports(manager) == [1, 3]
