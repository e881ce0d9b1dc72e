"""Liveness per manager against a real PostgreSQL: a silent manager's claims go back only after
it had a whole lease of a working database to beat - never across an outage, a read-only
spell or a stopped observer - and a manager declared dead learns it at its next beat.

The observers' monotonic clock is the test's (`Ticking`): time is stepped, never slept."""

from __future__ import annotations

import json
import time
from pathlib import Path

import jsonschema
import psycopg
import pytest

from kube_workqueue.manager.faults import LEDGER_READ_ONLY, UNREACHABLE, StorageFault
from kube_workqueue.manager.fleet.database import Database
from kube_workqueue.manager.fleet.ledger import PostgresLedger
from kube_workqueue.manager.ports import ClaimLost
from kube_workqueue.manager.views.queue_view import from_record

from .conftest import Ticking, sql, watch

LEASE = 10.0
REPO = Path(__file__).resolve().parents[2]


class Outage:
    """The statements of one ledger fail while `down` (as a cut-off connection's would)."""

    def __init__(self, ledger: PostgresLedger) -> None:
        self.down = False
        for db in (ledger.db, ledger.liveness.db):
            db.statement_hook = self

    def __call__(self, name: str, phase: str, cursor) -> None:
        if self.down and phase == "before":
            raise psycopg.OperationalError("connection refused (the test's outage)")


@pytest.fixture
def fleet(open_ledger):
    """Two managers on one ledger, one clock: `a` runs x, `b` watches."""
    clock = Ticking()
    a = open_ledger("a", lease=LEASE, monotonic=clock)
    b = open_ledger("b", lease=LEASE, monotonic=clock)
    a.see(["x", "y"])
    a.claim(1)
    a.start("x", "log")
    return a, b, clock


def test_a_manager_that_beats_keeps_its_claims_however_long(fleet):
    a, b, clock = fleet
    for _ in range(40):  # four leases
        clock.now += 1
        a.heartbeat_round()
        assert b.heartbeat_round() == []
    assert a.row("x").state == "running"


def test_a_silent_manager_is_declared_dead_after_a_whole_lease_and_not_before(fleet):
    a, b, clock = fleet
    assert watch(b, clock, seconds=LEASE - 1) == []
    assert watch(b, clock, seconds=2) == [("x", "a")]
    assert b.claim_counters()["expired"] == 1
    assert sql(b, "SELECT id FROM managers") == [("b",)]


def test_an_outage_gives_every_manager_a_whole_lease_after_it_ends(fleet):
    """The first manager back expires nothing: an observer counts a rival's silence only
    over time in which it could itself use the database."""
    a, b, clock = fleet
    watch(b, clock, seconds=LEASE - 2)  # a silent 8 s of 10 ...
    outage = Outage(b)
    outage.down = True
    for _ in range(15):  # ... then everyone is cut off for 15 s
        clock.now += 1
        with pytest.raises(StorageFault) as caught:
            b.heartbeat_round()
        assert caught.value.kind == UNREACHABLE
    outage.down = False
    assert watch(b, clock, seconds=LEASE - 1) == []  # back: a has a whole lease to beat
    for _ in range(2 * int(LEASE)):  # and it does, and lives on
        clock.now += 1
        a.heartbeat_round()
        assert b.heartbeat_round() == []
    assert a.row("x").state == "running"


def test_a_read_only_spell_is_no_time_in_which_a_rival_could_beat(fleet, postgres):
    a, b, clock = fleet
    watch(b, clock, seconds=LEASE - 2)
    name = postgres.rsplit("/", 1)[1]
    with psycopg.connect(postgres, autocommit=True) as admin:
        admin.execute(f'ALTER DATABASE "{name}" SET default_transaction_read_only = on')
        b.db.close(), b.liveness.db.close()  # (the setting reaches new connections)
        try:
            for _ in range(15):
                clock.now += 1
                try:
                    b.heartbeat_round()
                except StorageFault as fault:
                    assert fault.kind == LEDGER_READ_ONLY  # its own beat refused: said so
            with pytest.raises(StorageFault) as caught:
                b.probe()  # the fault hold's probe writes: read-only holds
            assert caught.value.kind == LEDGER_READ_ONLY
        finally:
            admin.execute(f'ALTER DATABASE "{name}" RESET default_transaction_read_only')
            b.db.close(), b.liveness.db.close()
    assert watch(b, clock, seconds=LEASE - 1) == []
    assert a.row("x").state == "running"


def test_an_observer_that_was_stopped_counts_nothing_of_the_time_it_slept(fleet):
    """A stopped (or starved) observer's late look restarts every count: it has not seen a
    whole lease, whatever its clock says."""
    a, b, clock = fleet
    b.heartbeat_round()
    clock.now += 60  # SIGSTOP, then SIGCONT: one look a minute later
    assert b.heartbeat_round() == []
    assert watch(b, clock, seconds=LEASE - 1) == []
    assert watch(b, clock, seconds=2) == [("x", "a")]


def test_a_beat_that_lands_before_the_declaration_keeps_the_manager_alive(fleet):
    """The declaration is fenced on the counter observed: a beat in between wins."""
    a, b, clock = fleet
    watch(b, clock, seconds=LEASE - 1)
    real = b.liveness._declare_dead

    def beat_first(rival, beat):
        a.liveness.beat()  # a wakes just as b decides
        return real(rival, beat)

    b.liveness._declare_dead = beat_first
    assert watch(b, clock, seconds=2) == []
    assert a.row("x").state == "running"


def test_a_manager_declared_dead_learns_it_counts_its_runs_lost_and_ends_them(fleet):
    a, b, clock = fleet
    ended = []
    a.on_claims_lost = ended.append
    watch(b, clock, seconds=LEASE + 1)
    assert b.claim(5) == ["x", "y"]  # the dead's items are anyone's
    a.heartbeat_round()  # a wakes: its row is gone
    assert ended == [["x"]]
    assert a.claim_counters()["lost"] == 1
    with pytest.raises(ClaimLost):
        a.finish("x", True, 0, None)  # its run's end is not written, not counted done
    assert a.claim_counters()["done"] == 0
    assert sql(a, "SELECT id FROM managers ORDER BY id") == [("a",), ("b",)]  # back, afresh
    b.start("x", "log")
    assert b.row("x").attempts == 2  # a's attempt counted, b's is the second


def test_claims_of_an_owner_no_managers_row_names_go_back_after_a_lease(open_ledger):
    clock = Ticking()
    a = open_ledger("a", lease=LEASE, monotonic=clock)
    a.see(["x", "y"])
    sql(a, "UPDATE items SET owner = 'ghost' WHERE name = 'x'")  # a row deleted by hand
    assert watch(a, clock, seconds=LEASE - 1) == []
    assert watch(a, clock, seconds=LEASE) == [("x", "ghost")]
    assert a.claim(5) == ["x", "y"]


def test_a_claim_by_a_manager_declared_dead_takes_nothing(fleet):
    a, b, clock = fleet
    watch(b, clock, seconds=LEASE + 1)
    assert a.claim(5) == []  # its row is gone: no claim slips in beside the declaration
    assert a.unregistered
    a.heartbeat_round()  # registers afresh
    sql(a, "UPDATE items SET listed_at = now() - interval '1 second'")  # (turns are over)
    assert a.claim(5) == ["x", "y"]
    with pytest.raises(ClaimLost):
        a.start("x", "log")  # not beside its old run here, which is still ending
    assert a.row("x").state == "failed" and not a.holds("x")


def test_status_of_a_silent_manager(open_ledger, postgres):
    from kube_workqueue.manager.fleet.queue_commands import FleetQueueOps

    a = open_ledger("a", lease=LEASE)
    a.see(["x", "y"])
    a.claim(1)
    a.start("x", "log")
    a.note_manager({"parallelism": 3, "max_attempts": 3, "retry_backoff": 1,
                    "retry_backoff_cap": 10})  # fmt: skip
    sql(a, "UPDATE managers SET said = clock_timestamp() - interval '7 seconds'")
    with FleetQueueOps(postgres) as ops:
        record = ops.status()
    assert record.facts["parallelism"] == 3  # late, but within its lease: still counted
    assert [m["id"] for m in record.silent_managers] == ["a"]
    assert "held by a silent manager a (not heard from for 7" in record.reasons["x"]
    sql(a, "UPDATE managers SET said = clock_timestamp() - interval '11 seconds'")
    with FleetQueueOps(postgres) as ops:
        record = ops.status()
    assert record.facts is None  # its lease ran out: its parallelism counts no more
    assert record.silent_managers[0]["heard_seconds"] >= 11
    shown = from_record(record, time.time(), None, {}).as_json()  # `status --json`
    jsonschema.validate(shown, json.loads((REPO / "docs" / "status.schema.json").read_text()))
    assert shown["silent_managers"][0]["id"] == "a"


def test_the_heartbeat_beats_while_the_main_connection_is_held(open_ledger):
    """A long refresh (or a claim waiting on a lock) holds the main connection; the
    heartbeat has one of its own."""
    import threading

    a = open_ledger("a")
    before = sql(a, "SELECT beat FROM managers WHERE id = 'a'")[0][0]
    held = threading.Event()
    release = threading.Event()

    def hold_main():
        with a.db.session():
            held.set()
            release.wait(30)

    thread = threading.Thread(target=hold_main)
    thread.start()
    try:
        assert held.wait(10)
        a.liveness.beat()
        with Database(a.db.url) as other:
            after = other.run(_beat_of_a())[0][0]
        assert after == before + 1
    finally:
        release.set()
        thread.join()


def _beat_of_a():
    from kube_workqueue.manager.fleet.statements import Statement

    return Statement("test", "SELECT beat FROM managers WHERE id = 'a'")
