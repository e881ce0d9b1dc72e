"""A worker's end outlives its manager (`keeper.py`, `kept.py`, `recovery.py`), with real
processes: the manager killed with -9 while its worker runs, the worker finishing while no
manager runs, a worker still running when the next manager starts, a keeper killed under a
live manager, and the journal of a keeper that died read by the next manager."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

from kube_workqueue.manager.backends.local.kept import LOST, TAKEN, KeeperLink
from kube_workqueue.manager.backends.local.ledger import SqliteLedger
from kube_workqueue.manager.backends.local.process import LocalBackend
from kube_workqueue.manager.backends.local.recovery import take_back
from kube_workqueue.manager.ports import Cancel
from tests.support.gated_workers import (
    items,
    kill_mid_run,
    lines,
    manager_again,
    rows,
    run,
    run_on_a_thread,
    status_of,
    worker,
)
from tests.support.servers import wait_until


def test_a_worker_that_ends_while_no_manager_runs_is_recorded_and_never_run_again(tmp_path):
    script, log, gate = worker(tmp_path)
    folder = items(tmp_path, ["a.x", "b.x"])
    state = tmp_path / "state"
    kill_mid_run(folder, state, script, log, started=2)
    gate.touch()  # both finish now, with no manager
    wait_until(lambda: len(lines(log)) == 4, timeout=30)
    wait_until(lambda: not any((state / "keepers").glob("*.sock")), timeout=30)  # keeper left
    done = subprocess.run(run(folder, state, script), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "2 worker(s) ended while no manager ran" in done.stderr
    assert sorted(lines(log)) == ["done a.x", "done b.x", "start a.x", "start b.x"]
    assert rows(state) == {"a.x": ("succeeded", 1, 0), "b.x": ("succeeded", 1, 0)}
    keepers = state / "keepers"  # the dead keeper's files tidied, its shims' words too
    assert [p.name for p in keepers.iterdir()] == ["ends"]
    assert not list((keepers / "ends").iterdir())


def test_a_worker_still_running_is_adopted_shown_running_and_its_failure_retried(tmp_path):
    script, log, gate = worker(tmp_path, code=3)
    folder = items(tmp_path, ["a.x"])
    state = tmp_path / "state"
    kill_mid_run(folder, state, script, log, started=1)
    command = run(folder, state, script, "--max-attempts", "2", "--retry-backoff", "0.1s")
    with manager_again(command, state) as second:
        body = status_of(state)
        assert body["manager"]["adopted"] == 1
        assert [(i["name"], i["state"]) for i in body["items"]] == [("a.x", "running")]
        assert lines(log) == ["start a.x"]  # adopted, not started again
        gate.touch()
        out, err = second.communicate(timeout=60)
    assert second.returncode == 1, err
    # the adopted attempt failed (exit 3) and counted; the retry was attempt 2
    assert lines(log) == ["start a.x", "done a.x", "start a.x", "done a.x"]
    assert rows(state) == {"a.x": ("failed", 2, 3)}


def test_an_attempt_whose_worker_never_started_goes_back_uncounted(tmp_path):
    with SqliteLedger(str(tmp_path)).open() as ledger:
        ledger.see(["a"])
        ledger.start("a", "/log")  # the manager died before it asked for the worker
    with SqliteLedger(str(tmp_path)).open() as ledger:
        taken = take_back(ledger, str(tmp_path))
        assert taken.requeued == ["a"] and ledger.state("a") == ("pending", 0)


def journal(tmp_path: Path, keeper_id: str, *entries: dict) -> None:
    keepers = tmp_path / "keepers"
    keepers.mkdir(exist_ok=True)
    (keepers / f"{keeper_id}.lock").touch()
    with open(keepers / f"{keeper_id}.journal", "w") as f:
        for entry in entries:
            f.write(json.dumps(entry) + "\n")
        f.write('{"end": {"id": 9, "na')  # a torn last line: the keeper died writing it


def test_a_dead_keeper_s_journal_settles_each_attempt_by_its_newest_word(tmp_path):
    sleeper = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        ticks = Path(f"/proc/{sleeper.pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
        with SqliteLedger(str(tmp_path)).open() as ledger:
            ledger.see(["ended", "orphan", "acked", "old"])
            for name in ("ended", "orphan", "acked", "old"):
                ledger.start(name, "/log")
            ledger.start("old", "/log")  # attempt 2 runs; the journal knows attempt 1 only
        start = {"name": "orphan", "attempt": 1, "pid": sleeper.pid, "ticks": ticks,
                 "began": 10.0}  # fmt: skip
        journal(
            tmp_path, "k1-dead",
            {"start": {"id": 1, "name": "ended", "attempt": 1, "pid": 1, "began": 10.0}},
            {"end": {"id": 1, "name": "ended", "attempt": 1, "pid": 1, "began": 10.0,
                     "code": 0, "at": 12.5}},
            {"start": {"id": 2, **start}},
            {"end": {"id": 3, "name": "acked", "attempt": 1, "code": 0, "began": 9.0}},
            {"ack": [3]},  # recorded before the manager died: not heard again
            {"end": {"id": 4, "name": "old", "attempt": 1, "code": 0, "began": 8.0}},
        )  # fmt: skip
        with SqliteLedger(str(tmp_path)).open() as ledger:
            taken = take_back(ledger, str(tmp_path))
            assert taken.recorded == ["ended"] and taken.lost == ["orphan"]
            assert sorted(taken.requeued) == ["acked", "old"]
            assert ledger.state("ended") == ("succeeded", 1)
            assert ledger.row("ended").finished == 12.5
            assert ledger.state("orphan") == ("failed", 1)
            assert ledger.row("orphan").last_error == LOST
            assert ledger.state("acked") == ("pending", 0)
            assert ledger.state("old") == ("pending", 1)
        assert sleeper.wait(10) == -signal.SIGKILL  # the orphan's group was ended
        assert list((tmp_path / "keepers").iterdir()) == []
    finally:
        if sleeper.poll() is None:
            sleeper.kill()


def test_an_attempt_started_again_is_settled_by_its_newest_start_not_an_older_end(tmp_path):
    """Attempt 1 interrupted (put back in line, uncounted) and started again under the same
    number: the end of its first start must not settle the second, which still runs."""
    sleeper = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        ticks = int(Path(f"/proc/{sleeper.pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
        with SqliteLedger(str(tmp_path)).open() as ledger:
            ledger.see(["busy"])
            ledger.start("busy", "/log")
        first = {"name": "busy", "attempt": 1, "pid": 1, "ticks": str(ticks - 500),
                 "began": 50.0}  # fmt: skip
        status = str(tmp_path / "keepers" / "ends" / "k1-dead.0")  # its shim wrote nothing yet
        second = {"name": "busy", "attempt": 1, "pid": sleeper.pid, "ticks": str(ticks),
                  "began": 40.0, "status": status}  # fmt: skip
        journal(
            tmp_path, "k1-dead",
            {"start": {"id": 1, **first}},
            {"end": {"id": 1, **first, "code": None, "interrupted": True}},  # never acked
            {"start": {"id": 2, **second}},
        )  # fmt: skip
        with SqliteLedger(str(tmp_path)).open() as ledger:
            taken = take_back(ledger, str(tmp_path))
            assert list(taken.orphans) == [("busy", 1)] and taken.requeued == []
            assert taken.orphans[("busy", 1)]["pid"] == sleeper.pid
            assert ledger.state("busy") == ("running", 1)
    finally:
        sleeper.kill()
        sleeper.wait(10)


def test_a_keeper_killed_under_a_live_manager_costs_its_workers_nothing(tmp_path):
    """The worker's shim outlives its keeper: the next keeper watches it, and its end is the
    worker's own - not ended, not counted failed."""
    script, log, gate = worker(tmp_path)
    backend = LocalBackend([str(script)], str(tmp_path / "state"))
    thread, results = run_on_a_thread(backend)
    wait_until(lambda: lines(log) == ["start a"], timeout=30)
    keeper = backend._link.process
    os.kill(keeper, signal.SIGKILL)
    wait_until(lambda: backend._link is not None and backend._link.process != keeper, 30)
    gate.touch()  # the worker finishes after its keeper died
    thread.join(30)
    assert results[0].succeeded and results[0].exit_code == 0, results[0]
    assert lines(log) == ["start a", "done a"]  # started once, ended on its own
    second = backend.run("b", {"name": "b"}, 1, Cancel())  # the new keeper runs the next one
    assert second.succeeded
    backend.shutdown(1)
    backend.close()


def test_a_spawn_its_keeper_died_before_starting_goes_back_uncounted(tmp_path):
    """The keeper stopped, asked for a worker, killed: the ask was never journaled, so no
    worker ran - the attempt is interrupted (back in line, uncounted), not a lost end."""
    script, log, gate = worker(tmp_path)
    gate.touch()
    backend = LocalBackend([str(script)], str(tmp_path / "state"))
    link = backend._keeper()
    os.kill(link.process, signal.SIGSTOP)
    thread, results = run_on_a_thread(backend)
    try:
        wait_until(lambda: link.running == 1, timeout=30)  # asked, not yet read
        os.kill(link.process, signal.SIGKILL)
        thread.join(30)
        assert results[0].interrupted and results[0].error is None, results[0]
        assert lines(log) == []
        assert backend.run("b", {"name": "b"}, 1, Cancel()).succeeded  # a new keeper runs it
        assert lines(log) == ["start b", "done b"]
    finally:
        backend.shutdown(1)
        backend.close()


def test_a_keeper_killed_as_it_starts_is_started_again_and_costs_the_item_nothing(
    tmp_path, monkeypatch
):
    script, log, gate = worker(tmp_path)
    gate.touch()
    killed = []
    read_reply = KeeperLink._read_reply

    def killed_before_ready(link):
        if not killed:  # the first keeper dies before it says it is ready
            killed.append(link.process)
            os.kill(link.process, signal.SIGKILL)
        return read_reply(link)

    monkeypatch.setattr(KeeperLink, "_read_reply", killed_before_ready)
    backend = LocalBackend([str(script)], str(tmp_path / "state"))
    try:
        outcome = backend.run("a", {"name": "a"}, 1, Cancel())
        assert outcome.succeeded, outcome
        assert killed and backend._link.process != killed[0]
        assert lines(log) == ["start a", "done a"]
    finally:
        backend.shutdown(1)
        backend.close()


def test_a_later_manager_adopts_a_live_keeper_and_hears_the_end_once(tmp_path):
    script, log, gate = worker(tmp_path)
    backend = LocalBackend([str(script)], str(tmp_path / "state"))
    first = []
    thread = threading.Thread(target=lambda: first.append(backend.run("a", {}, 1, Cancel())))
    thread.start()
    wait_until(lambda: lines(log) == ["start "], timeout=30)
    link = backend._link
    link.conn.shutdown(socket.SHUT_RDWR)  # as if its manager had died
    thread.join(30)
    assert first[0].error == TAKEN or first[0].error == LOST
    keepers = str(tmp_path / "state" / "keepers")
    other, running, ended = KeeperLink.adopt(keepers, link.keeper_id)
    assert [r["name"] for r in running] == ["a"] and ended == []
    gate.touch()
    assert other.child(running[0]["id"]).wait(30) == 0
    assert lines(log) == ["start ", "done "]  # started once, its end heard once
    other.close(wait=0)
    wait_until(lambda: not os.path.exists(os.path.join(keepers, link.keeper_id + ".sock")), 30)


def test_a_worker_runs_in_the_manager_s_working_directory_by_a_relative_path(tmp_path):
    (tmp_path / "here").mkdir()
    script = tmp_path / "here" / "w.sh"
    script.write_text('#!/bin/sh\npwd > "$WORK_ITEM_FILE.cwd"\ncp "$WORK_ITEM_FILE.cwd" ./cwd\n')
    script.chmod(0o755)
    folder = items(tmp_path, ["a.x"])
    done = subprocess.run(
        [sys.executable, "-m", "kube_workqueue.manager.cli", "run", str(folder), "--suffix", ".x",
         "--state-dir", str(tmp_path / "state"), "--settle", "0", "--", "./w.sh"],
        cwd=tmp_path / "here", capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "here" / "cwd").read_text().strip() == str(tmp_path / "here")


def test_a_keeper_caught_leaving_is_waited_for_and_its_journal_read(tmp_path, monkeypatch):
    """Between removing its socket and letting go of its lock, a leaving keeper can be neither
    asked nor read: the survey waits for the lock, then reads the journal. Passed over, its
    unrecorded ends made the items look never started - they ran again (4 in the drive)."""
    import fcntl

    from kube_workqueue.manager.backends.local import recovery

    with SqliteLedger(str(tmp_path)).open() as ledger:
        ledger.see(["a"])
        ledger.start("a", "/log")
    record = {"id": 1, "name": "a", "attempt": 1, "pid": 1, "began": 10.0}
    journal(tmp_path, "k2-leaving", {"start": record}, {"end": {**record, "code": 0, "at": 11.0}})
    held = os.open(tmp_path / "keepers" / "k2-leaving.lock", os.O_RDWR)
    fcntl.flock(held, fcntl.LOCK_EX)  # the keeper, leaving: locked, no socket
    asked = threading.Event()
    adopt = recovery._adopt

    def adopt_and_tell(*args):
        answered = adopt(*args)
        asked.set()
        return answered

    monkeypatch.setattr(recovery, "_adopt", adopt_and_tell)
    letting_go = threading.Thread(target=lambda: (asked.wait(30), os.close(held)))
    letting_go.start()  # it exits once the survey has found it unaskable
    with SqliteLedger(str(tmp_path)).open() as ledger:
        taken = take_back(ledger, str(tmp_path))
        assert taken.recorded == ["a"] and taken.requeued == []
        assert ledger.state("a") == ("succeeded", 1)  # not run again
    letting_go.join()


def test_a_keeper_that_neither_answers_nor_leaves_is_one_line(tmp_path, monkeypatch):
    import fcntl

    import pytest

    from kube_workqueue.manager.backends.local import recovery
    from kube_workqueue.manager.errors import UserError

    monkeypatch.setattr(recovery, "LEAVING_SECONDS", 0.2)
    with SqliteLedger(str(tmp_path)).open() as ledger:
        ledger.see(["a"])
        ledger.start("a", "/log")
    journal(tmp_path, "k3-stuck")
    held = os.open(tmp_path / "keepers" / "k3-stuck.lock", os.O_RDWR)
    fcntl.flock(held, fcntl.LOCK_EX)
    try:
        with SqliteLedger(str(tmp_path)).open() as ledger:
            with pytest.raises(UserError, match="k3-stuck neither answers nor leaves"):
                take_back(ledger, str(tmp_path))
            assert ledger.state("a") == ("running", 1)  # nothing decided without its word
    finally:
        os.close(held)


def test_a_worker_that_ends_while_it_is_being_adopted_is_heard_not_run_again(tmp_path, monkeypatch):
    """The keeper says a worker runs; it ends before the survey looks at it (the link's reader
    takes the end at once). It must still be heard - as adopted, its end recorded - not put
    back in line as never started (which ran it twice: 1 item in the drive under load)."""
    script, log, gate = worker(tmp_path)
    folder = items(tmp_path, ["a.x"])
    state = tmp_path / "state"
    kill_mid_run(folder, state, script, log, started=1)
    adopt = KeeperLink.adopt.__func__

    def adopt_then_end(cls, keepers_dir, keeper_id):
        link, running, ended = adopt(cls, keepers_dir, keeper_id)
        gate.touch()  # the worker ends now, between the keeper's answer and the survey's look
        for record in running:
            wait_until(lambda r=record: link._adopted[r["id"]].returncode is not None, 30)
        return link, running, ended

    monkeypatch.setattr(KeeperLink, "adopt", classmethod(adopt_then_end))
    with SqliteLedger(str(state)).open() as ledger:
        taken = take_back(ledger, str(state))
        assert taken.requeued == [] and list(taken.adopted) == [("a.x", 1)]
        child = taken.adopted[("a.x", 1)]
        assert child.wait(30) == 0  # its end, already heard
        for link in taken.links:
            link.close(wait=0)
    assert lines(log) == ["start a.x", "done a.x"]


def test_a_worker_started_after_the_stop_had_looked_is_ended_not_awaited(tmp_path):
    """The race seen as a manager hanging at SIGTERM: a run() that checked for the stop just
    before it was asked starts its worker after `shutdown` found nothing running and left. That
    worker is ended at once (its run reports it), never awaited until it ends by itself."""
    script, log, gate = worker(tmp_path)
    backend = LocalBackend([str(script)], str(tmp_path / "state"))
    backend.shutdown(grace=5)  # nothing running: it looked, and left
    backend._stopping.clear()  # as for a run() past its own check of the stop: the race
    thread, results = run_on_a_thread(backend)
    thread.join(60)  # the gate never opens: an awaited worker would run forever
    try:
        assert not thread.is_alive() and not results[0].succeeded
        assert lines(log) in ([], ["start a"])  # ended, whether or not it began to log
    finally:
        gate.touch()
        thread.join(30)
        backend.close()
