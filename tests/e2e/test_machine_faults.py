"""Faults of the machine on the state directory, on the real commands and real file systems:
a full disk (a small tmpfs), a read-only file system (a read-only bind mount at start; ext4
remounting itself read-only after an error mid-run) and an I/O error (ext4's shutdown: every
I/O fails with EIO). Each is one line and exit 3 within the run's bound, never a traceback;
the ledger checks sound afterwards; and a rerun finishes every item without starting again
any item the ledger had recorded succeeded. A long-running manager holds dispatch instead,
says why in `status`, the dashboard and a metric, and carries on by itself when writes
succeed again."""

from __future__ import annotations

import json
import os
import signal
import sqlite3

import pytest
import requests

from tests.support.filesystems import Ext4Image, read_only_bind, small_tmpfs
from tests.support.servers import free_port, wait_until

from .conftest import spawn_workqueue, workqueue

WORKER = """#!/bin/sh
name=$(sed 's/.*"name":"\\([^"]*\\)".*/\\1/' "$WORK_ITEM_FILE")
echo "$name" >> {started}
head -c {log_bytes} /dev/zero | tr '\\0' 'x' || exit 1
sleep {sleep}
echo "$name" >> {started}.done
"""


def folder(tmp_path, count: int, *, log_bytes: int = 0, sleep: float = 0):
    items = tmp_path / "items"
    items.mkdir()
    for k in range(count):
        (items / f"item-{k:03d}.mp4").write_bytes(b"x")
    started = tmp_path / "started.txt"
    worker = tmp_path / "worker.sh"
    worker.write_text(WORKER.format(started=started, log_bytes=log_bytes, sleep=sleep))
    worker.chmod(0o755)
    return items, worker, started


def started_names(path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def recorded(state, wanted: str = "succeeded") -> set[str]:
    """The items the ledger on disk has in state `wanted` (read directly, read-only)."""
    db = sqlite3.connect(f"file:{state}/ledger.sqlite3?mode=ro", uri=True)
    try:
        return {n for (n,) in db.execute("SELECT name FROM items WHERE state=?", (wanted,))}
    finally:
        db.close()


def run(items, state, worker, *extra):
    return workqueue(
        "run", items, "--state-dir", state, "--settle", "0", "--grace", "2s", *extra,
        "--", worker, timeout=90,
    )  # fmt: skip


def assert_one_line_fault(done, *words):
    assert done.returncode == 3, (done.returncode, done.stderr[-2000:])
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("workqueue run: error")]
    assert len(errors) == 1, done.stderr[-2000:]
    for word in words:
        assert word in errors[0], errors[0]
    assert "nothing was lost" in errors[0]


def assert_rerun_finishes_without_repeats(items, state, worker, started):
    succeeded_before = recorded(state)
    check = workqueue("ledger", "check", "--state-dir", state)
    assert check.returncode == 0 and "sound" in check.stdout, check.stdout + check.stderr
    before = len(started_names(started))
    again = run(items, state, worker)
    assert again.returncode == 0, again.stdout + again.stderr
    rerun = started_names(started)[before:]
    assert not succeeded_before & set(rerun), "an item recorded succeeded ran again"
    assert recorded(state) == {p.name for p in items.iterdir()}


def test_a_full_disk_ends_a_run_with_one_line_and_a_rerun_finishes_the_rest(tmp_path):
    items, worker, started = folder(tmp_path, 60, log_bytes=40_000)
    with small_tmpfs(tmp_path / "state", 640 * 1024) as disk:
        done = run(items, disk.path, worker)
        assert_one_line_fault(done, "is full", str(disk.path))
        assert 0 < len(recorded(disk.path)) < 60
        disk.grow(64 * 1024 * 1024)  # room again: free space and run again
        assert_rerun_finishes_without_repeats(items, disk.path, worker, started)


def test_a_full_disk_at_start_is_one_line(tmp_path):
    items, worker, _ = folder(tmp_path, 3)
    with small_tmpfs(tmp_path / "state", 64 * 1024) as disk:
        (disk.path / "filler").write_bytes(b"\0" * (60 * 1024))  # the disk is all but full
        try:
            (disk.path / "more").write_bytes(b"\0" * (8 * 1024))
        except OSError:
            pass
        done = run(items, disk.path, worker)
        assert_one_line_fault(done, "is full")


def test_ledger_backup_on_a_full_disk_is_one_line_and_leaves_no_partial_copy(tmp_path):
    items, worker, _ = folder(tmp_path, 20)
    with small_tmpfs(tmp_path / "state", 1024 * 1024) as disk:
        assert run(items, disk.path, worker).returncode == 0
        filler = disk.path / "filler"
        try:
            filler.write_bytes(b"\0" * (2 * 1024 * 1024))
        except OSError:
            pass  # as much as fits: the disk is full now
        listed = sorted(p.name for p in (disk.path / "backups").iterdir())
        done = workqueue("ledger", "backup", "--state-dir", disk.path)
        assert done.returncode == 3 and "Traceback" not in done.stderr, done.stderr
        assert "is full" in done.stderr and len(done.stderr.strip().splitlines()) == 1
        assert sorted(p.name for p in (disk.path / "backups").iterdir()) == listed


def test_a_read_only_state_directory_refuses_a_run_and_still_answers_status(tmp_path):
    items, worker, started = folder(tmp_path, 5)
    state = tmp_path / "state"
    assert run(items, state, worker).returncode == 0
    (items / "item-new.mp4").write_bytes(b"x")
    with read_only_bind(state, tmp_path / "ro") as ro:
        done = run(items, ro, worker)
        assert_one_line_fault(done, "read-only file system", str(ro))
        assert "restore" not in done.stderr  # not a damaged ledger
        status = workqueue("status", "--state-dir", ro, "--json")
        assert status.returncode == 0, status.stderr
        assert json.loads(status.stdout)["counts"]["succeeded"] == 5
        check = workqueue("ledger", "check", "--state-dir", ro)
        assert check.returncode == 0 and "sound" in check.stdout, check.stderr
    assert_rerun_finishes_without_repeats(items, state, worker, started)


@pytest.mark.parametrize(
    "fault, says",
    [
        ("fail", "read-only file system"),  # ext4 remounts itself read-only after an error
        ("shut_down", "I/O error"),  # every later read and write is EIO
    ],
)
def test_a_disk_that_fails_mid_run_is_one_line_and_a_rerun_finishes(tmp_path, fault, says):
    items, worker, started = folder(tmp_path, 40, sleep=0.05)
    with Ext4Image(tmp_path / "disk") as disk:
        state = disk.path / "state"
        proc = spawn_workqueue(
            "run", items, "--state-dir", state, "--settle", "0", "--grace", "2s",
            "--parallelism", "1", "--", worker,
        )  # fmt: skip
        try:
            wait_until(lambda: len(started_names(started)) >= 5, timeout=30)
            # What the kernel had written back when the fault came is what survives it: a
            # sync stands for the half minute of writeback a real run has had by then (the
            # ledger's durability is synchronous=NORMAL: the last transitions may be lost,
            # and those items run again - never one the disk kept as succeeded).
            os.sync()
            wait_until(lambda: len(started_names(started)) >= 8, timeout=30)
            getattr(disk, fault)()
            _, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 3 and "Traceback" not in err, err[-2000:]
        assert says in err and err.count("workqueue run: error") == 1
        disk.mend()
        assert_rerun_finishes_without_repeats(items, state, worker, started)


def test_a_long_running_manager_holds_on_a_full_disk_and_resumes_by_itself(
    tmp_path, ambassador_server
):
    items, worker, started = folder(tmp_path, 40, log_bytes=40_000)
    source = ambassador_server(items, "--suffix", ".mp4")
    port = free_port()
    with small_tmpfs(tmp_path / "state", 640 * 1024) as disk:
        proc = spawn_workqueue(
            "manager", "--source", source.url, "--worker-cmd", str(worker),
            "--state-dir", disk.path, "--poll-interval", "1s", "--metrics-port", port,
        )  # fmt: skip
        base = f"http://127.0.0.1:{port}"
        try:

            def status():
                done = workqueue("status", "--state-dir", disk.path, "--json")
                return json.loads(done.stdout) if done.returncode == 0 else {}

            wait_until(lambda: (status().get("held") or "").count("is full"), timeout=60)
            body = status()
            pending = [i for i in body["items"] if i["state"] == "pending"]
            assert pending and all("holds dispatch" in i["reason"] for i in pending)
            assert body["forecast"]["drain_seconds"] is None  # no schedule while held
            text = workqueue("status", "--state-dir", disk.path).stdout
            assert "held: the state directory" in text
            metrics = requests.get(base + "/metrics", timeout=5).text
            assert 'workqueue_storage_fault{kind="full"} 1.0' in metrics
            board = requests.get(base + "/ui/board.json", timeout=5).json()
            assert "is full" in board["held"]
            assert proc.poll() is None  # it waits, it does not end

            disk.grow(64 * 1024 * 1024)
            wait_until(lambda: len(recorded(disk.path)) == 40, timeout=90)
            assert status().get("held") is None
            assert "workqueue_storage_fault" not in requests.get(base + "/metrics", timeout=5).text
        finally:
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=60)
        assert "Traceback" not in err, err[-3000:]
        assert err.count("ERROR the state directory") == 1, err[-3000:]  # said once
        assert "free space and the manager carries on by itself" in err
        assert "writes succeed again" in err
    finished = started_names(tmp_path / "started.txt.done")
    assert sorted(finished) == sorted(set(finished)) and len(finished) == 40  # each once
