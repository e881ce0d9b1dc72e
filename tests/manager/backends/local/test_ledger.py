"""The SQLite ledger: transitions, recovery after a crash, one manager per state directory."""

from __future__ import annotations

import pytest

from kube_workqueue.manager.backends.local.ledger import SqliteLedger
from kube_workqueue.manager.backends.local.ledger_file import LedgerBusy


def test_lifecycle_of_an_item(tmp_path):
    with SqliteLedger(str(tmp_path), clock=lambda: 100.0).open() as ledger:
        assert ledger.see(["a", "b", "a"]) == ["a", "b"]
        assert ledger.see(["a"]) == []
        assert ledger.state("a") == ("pending", 0)
        assert ledger.start("a", "/log") == 1
        ledger.finish("a", False, 3, "exit code 3")
        assert ledger.state("a") == ("failed", 1)
        assert ledger.start("a", "/log") == 2
        ledger.finish("a", True, 0, None)
        row = ledger.row("a")
        assert (row.state, row.attempts, row.exit_code, row.first_seen) == ("succeeded", 2, 0, 100)
        assert ledger.counts() == {
            "pending": 1,
            "running": 0,
            "succeeded": 1,
            "failed": 0,
            "cancelled": 0,
        }


def test_state_survives_reopening(tmp_path):
    with SqliteLedger(str(tmp_path)).open() as ledger:
        ledger.see(["a"])
        ledger.start("a", "/log")
        ledger.finish("a", True, 0, None)
    with SqliteLedger(str(tmp_path)).open() as ledger:
        assert ledger.state("a") == ("succeeded", 1)


def test_running_rows_and_an_end_recorded_at_its_own_time(tmp_path):
    told = []
    with SqliteLedger(str(tmp_path)).open() as ledger:
        ledger.see(["a", "b"])
        ledger.start("a", "/log")
    with SqliteLedger(str(tmp_path)).open() as ledger:
        ledger.on_recorded = told.append
        assert ledger.running_rows() == [("a", 1, None, None)]
        ledger.finish("a", False, 3, "exit code 3", at=1234.5)
        assert ledger.row("a").finished == 1234.5
        assert ledger.state("a") == ("failed", 1)
        assert told == ["a"]


def test_retry_only_failed_items(tmp_path):
    with SqliteLedger(str(tmp_path)).open() as ledger:
        ledger.see(["a", "b"])
        ledger.start("a", "/log")
        ledger.finish("a", False, 1, "boom")
        assert ledger.retry("b") is False
        assert ledger.retry("a") is True
        assert ledger.state("a") == ("pending", 0)


def test_retry_requests_reach_the_running_manager(tmp_path):
    with SqliteLedger(str(tmp_path)).open() as manager:
        manager.see(["a"])
        manager.start("a", "/log")
        manager.finish("a", False, 1, "boom")
        with SqliteLedger(str(tmp_path)).open(exclusive=False) as cli:
            cli.request_retry("a")
        assert manager.take_retry_requests() == ["a"]
        assert manager.state("a") == ("pending", 0)
        assert manager.take_retry_requests() == []


def test_a_second_manager_on_the_same_directory_is_refused(tmp_path):
    with SqliteLedger(str(tmp_path)).open(), pytest.raises(LedgerBusy, match="another manager"):
        SqliteLedger(str(tmp_path)).open()


def test_a_schema_1_ledger_is_upgraded_in_place_and_keeps_its_items(tmp_path):
    """Ledgers written before item versions (schema 1) open, gain the version column and the
    runs history, and are stamped schema 2; nothing they held is lost."""
    import sqlite3

    from kube_workqueue.manager.backends.local import integrity
    from kube_workqueue.manager.backends.local.ledger import SqliteLedger

    state = tmp_path / "state"
    state.mkdir()
    db = sqlite3.connect(state / "ledger.sqlite3")
    db.executescript(
        """
        CREATE TABLE items (name TEXT PRIMARY KEY, state TEXT NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0, first_seen REAL NOT NULL, started REAL,
            finished REAL, exit_code INTEGER, log_path TEXT, last_error TEXT, pgid INTEGER,
            pgid_start TEXT);
        CREATE TABLE retry_requests (name TEXT PRIMARY KEY);
        INSERT INTO items(name, state, attempts, first_seen) VALUES ('old.mp4', 'succeeded', 1, 1);
        """
    )
    db.execute(f"PRAGMA application_id={integrity.APPLICATION_ID}")
    db.execute("PRAGMA user_version=1")
    db.commit()
    db.close()
    with SqliteLedger(str(state)).open() as ledger:
        assert ledger.state("old.mp4") == ("succeeded", 1)
        assert ledger.version_ran("old.mp4") is None  # ran before versions: unknown
        assert ledger.rerun("old.mp4", "s-new") is True
        assert ledger.start("old.mp4", "/log", "s-new") == 1
        assert ledger.version_ran("old.mp4") == "s-new"
        assert ledger.history("old.mp4")[0]["state"] == "succeeded"
    db = sqlite3.connect(state / "ledger.sqlite3")
    assert db.execute("PRAGMA user_version").fetchone()[0] == 2
    db.close()
