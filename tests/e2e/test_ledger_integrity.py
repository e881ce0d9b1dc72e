"""A damaged ledger never costs an item: the manager and every command that reads the ledger
refuse one they cannot trust (one line, exit 2, nothing dispatched), and `workqueue ledger
restore` brings back the record of what ran, so no succeeded item runs again."""

from __future__ import annotations

import os
import sqlite3

import pytest

from kube_workqueue.manager.backends.local import integrity
from kube_workqueue.manager.backends.local.ledger import LedgerBusy, SqliteLedger
from tests.support.folders import make_items
from tests.support.in_process_ambassador import in_process_ambassador_server  # noqa: F401  (fixture)

from .conftest import manager_once, workqueue

NAMES = [f"clip-{i}.mp4" for i in range(5)]


@pytest.fixture
def ran_once(tmp_path, ambassador_server, marker_worker):
    """Five items that succeeded once; returns (server, state dir)."""
    make_items(tmp_path / "videos", NAMES)
    server = ambassador_server(tmp_path / "videos")
    state = tmp_path / "state"
    r = manager_once(server, marker_worker, state)
    assert r.returncode == 0, r.stderr
    assert sorted(marker_worker.ended()) == NAMES
    return server, state


def one_line_exit_2(r, *words):
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    for word in words:
        assert word in lines[0]


def zero(path):
    path.write_bytes(b"")


def halve(path):
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) // 2)


def scramble(path):
    path.write_bytes(os.urandom(8192))


def foreign(path):
    path.unlink()
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE photos (id INTEGER)")


@pytest.mark.parametrize(
    ("damage", "says"),
    [
        (zero, "empty (0 bytes)"),
        (halve, "damaged"),
        (scramble, "not an SQLite database"),
        (foreign, "not a workqueue ledger"),
    ],
    ids=["zero-bytes", "half", "random-bytes", "someone-elses"],
)
def test_every_command_refuses_a_ledger_it_cannot_trust(
    tmp_path, ran_once, marker_worker, damage, says
):
    server, state = ran_once
    # enough rows that half a ledger loses pages, not just free space
    with SqliteLedger(str(state)).open() as ledger:
        ledger.see([f"filler-{i:05d}-{'x' * 200}" for i in range(3000)])
    damage(state / "ledger.sqlite3")
    started = len(marker_worker.started())
    commands = [
        ["status", "--state-dir", state],
        ["manager", "--source", server.url, "--worker-cmd", marker_worker.path,
         "--state-dir", state, "--once"],
    ]  # fmt: skip
    if damage in (halve, scramble):  # the cases that ended in tracebacks everywhere
        commands += [
            ["retry", "clip-1.mp4", "--state-dir", state],
            ["stability", "--from-state", state],
            ["run", tmp_path / "videos", "--state-dir", state, "--settle", "0", "--",
             marker_worker.path],
        ]  # fmt: skip
    for args in commands:
        one_line_exit_2(workqueue(*args), says, str(state))
    assert len(marker_worker.started()) == started  # nothing ran again


def test_restore_brings_back_what_ran(tmp_path, ran_once, marker_worker):
    server, state = ran_once
    assert integrity.backups(str(state))  # the manager backed up the ledger as it stopped
    zero(state / "ledger.sqlite3")
    r = workqueue("ledger", "restore", "--state-dir", state)
    assert r.returncode == 0, r.stderr
    assert "5 succeeded" in r.stdout and "kept as" in r.stdout
    r = manager_once(server, marker_worker, state)
    assert r.returncode == 0, r.stderr
    assert "0 succeeded, 5 already done" in r.stdout
    assert sorted(marker_worker.started()) == NAMES  # each once, in all


def test_a_missing_ledger_next_to_earlier_logs_is_not_new(ran_once, marker_worker):
    server, state = ran_once
    os.unlink(state / "ledger.sqlite3")
    r = manager_once(server, marker_worker, state)
    one_line_exit_2(r, "missing", "ledger restore")
    assert sorted(marker_worker.started()) == NAMES


def test_restore_is_refused_while_a_manager_holds_the_directory(tmp_path):
    holder = SqliteLedger(str(tmp_path)).open()
    try:
        one_line_exit_2(workqueue("ledger", "restore", "--state-dir", tmp_path), "another manager")
    finally:
        holder.close()
    bogus = tmp_path / "bogus.sqlite3"
    bogus.write_bytes(b"not a ledger")
    one_line_exit_2(
        workqueue("ledger", "restore", "--state-dir", tmp_path, "--from", bogus),
        "not a sound workqueue ledger",
    )


def test_a_ledger_knows_it_is_one_and_is_durable_as_documented(tmp_path):
    with SqliteLedger(str(tmp_path)).open() as ledger:
        assert ledger.durability() == ("wal", 1)  # WAL, synchronous=NORMAL
        ledger.see(["a"])
    with sqlite3.connect(tmp_path / "ledger.sqlite3") as db:
        assert db.execute("PRAGMA application_id").fetchone()[0] == integrity.APPLICATION_ID
        assert db.execute("PRAGMA user_version").fetchone()[0] == integrity.SCHEMA_VERSION
    r = workqueue("ledger", "check", "--state-dir", tmp_path)
    assert r.returncode == 0 and "sound, 1 items" in r.stdout


def test_a_ledger_of_an_earlier_version_is_stamped_not_refused(tmp_path):
    from kube_workqueue.manager.backends.local.ledger_file import SCHEMA

    with sqlite3.connect(tmp_path / "ledger.sqlite3") as db:  # made before ledgers were stamped
        db.executescript(SCHEMA)
        db.execute(
            "INSERT INTO items(name, state, attempts, first_seen) VALUES ('a','succeeded',1,0)"
        )
    with SqliteLedger(str(tmp_path)).open() as ledger:
        assert ledger.state("a") == ("succeeded", 1)
    with sqlite3.connect(tmp_path / "ledger.sqlite3") as db:
        assert db.execute("PRAGMA application_id").fetchone()[0] == integrity.APPLICATION_ID


def test_backups_rotate(tmp_path):
    with SqliteLedger(str(tmp_path)).open() as ledger:
        ledger.see(["a"])
        for _ in range(integrity.KEEP_BACKUPS + 3):
            ledger.backup()
    assert len(integrity.backups(str(tmp_path))) == integrity.KEEP_BACKUPS
    assert all(integrity.sound(b) for b in integrity.backups(str(tmp_path)))


def test_a_second_manager_is_still_refused(tmp_path):
    with SqliteLedger(str(tmp_path)).open(), pytest.raises(LedgerBusy):
        SqliteLedger(str(tmp_path)).open()
