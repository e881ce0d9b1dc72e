"""When more than a manager dies (`keeper.py`, `shim.py`, `recovery.py`), with real processes:
a keeper killed between a worker's journaled start and its command to the slot's shim; a
manager and its keeper killed with -9 together while workers run - a worker ending after
them, one still running, one gone with its shim too; and a slot's shim killed under its
worker, or its worker leaving something running behind it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

from kube_workqueue.manager.backends.local import keeper_protocol as wire
from kube_workqueue.manager.backends.local import shim
from kube_workqueue.manager.backends.local.kept import KeeperLink
from kube_workqueue.manager.backends.local.process import LocalBackend
from kube_workqueue.manager.ports import Cancel
from tests.support.crash_drive import keepers_of
from tests.support.gated_workers import (
    items,
    lines,
    manager_again,
    rows,
    run,
    run_on_a_thread,
    status_of,
    worker,
)
from tests.support.servers import wait_until

SHIM_WITHOUT_A_COMMAND = """
import os, socket, sys
from kube_workqueue.manager.backends.local import shim
status, marker = sys.argv[1], sys.argv[2]
ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
pid = os.fork()
if pid == 0:
    ours.close()
    shim.serve(theirs, status, "/bin/touch", ["touch", marker], dict(os.environ), None)
theirs.close()
ours.close()  # the keeper died between its journal line and its command to the shim
print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), pid)
"""


def test_a_shim_whose_keeper_died_before_its_command_starts_nothing(tmp_path):
    """A slot's shim, its worker's start journaled, the keeper killed before it sent the
    command (the other half of the window `test_keeper.py` drives through a live manager):
    the shim starts no worker and leaves, its file saying nothing of that start (so the start
    is interrupted: run again, uncounted)."""
    status, marker = tmp_path / "status", tmp_path / "ran"
    done = subprocess.run([sys.executable, "-c", SHIM_WITHOUT_A_COMMAND, str(status),
                           str(marker)], capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    code, _ = map(int, done.stdout.split())
    assert code == 0 and not marker.exists()
    assert shim.read_status(str(status), "1") is None


def keeper_of(manager_pid: int) -> int:
    """The pid of the keeper a manager started."""
    (keeper,) = keepers_of(manager_pid)
    return keeper


def kill_both_mid_run(folder, state, script, log, started: int, *extra) -> None:
    """A manager and its keeper killed with -9 together while `started` workers run."""
    proc = subprocess.Popen(run(folder, state, script, "--parallelism", "4", *extra),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        wait_until(lambda: len(lines(log)) >= started, timeout=60)
        keeper = keeper_of(proc.pid)
        os.kill(proc.pid, signal.SIGKILL)
        os.kill(keeper, signal.SIGKILL)
    finally:
        proc.wait(30)


def test_a_worker_ending_after_its_keeper_and_manager_died_is_recorded_as_it_ended(tmp_path):
    """Killed together, manager and keeper leave the workers' shims: each writes how its
    worker ended, and the next manager records that - once, never failed, never run again."""
    script, log, gate = worker(tmp_path)
    folder = items(tmp_path, ["a.x", "b.x"])
    state = tmp_path / "state"
    kill_both_mid_run(folder, state, script, log, started=2)
    gate.touch()  # both finish now, with no manager and no keeper
    wait_until(lambda: len(lines(log)) == 4, timeout=30)
    done = subprocess.run(run(folder, state, script), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "2 worker(s) ended while no manager ran" in done.stderr
    assert sorted(lines(log)) == ["done a.x", "done b.x", "start a.x", "start b.x"]
    assert rows(state) == {"a.x": ("succeeded", 1, 0), "b.x": ("succeeded", 1, 0)}


def test_a_worker_still_running_after_its_keeper_and_manager_died_is_watched(tmp_path):
    script, log, gate = worker(tmp_path, code=3)
    folder = items(tmp_path, ["a.x"])
    state = tmp_path / "state"
    kill_both_mid_run(folder, state, script, log, started=1)
    command = run(folder, state, script, "--max-attempts", "1")
    with manager_again(command, state) as second:
        assert [(i["name"], i["state"]) for i in status_of(state)["items"]] == [("a.x", "running")]
        assert lines(log) == ["start a.x"]  # watched, not started again
        gate.touch()
        out, err = second.communicate(timeout=60)
    assert second.returncode == 1, err  # its own failure (exit 3), as its shim saw it
    assert lines(log) == ["start a.x", "done a.x"]
    assert rows(state) == {"a.x": ("failed", 1, 3)}


def test_a_worker_gone_with_its_shim_keeper_and_manager_runs_again_uncounted(tmp_path):
    """Nothing said how it ended (a machine restart would do this): not the item's doing."""
    script, log, gate = worker(tmp_path)
    folder = items(tmp_path, ["a.x"])
    state = tmp_path / "state"
    proc = subprocess.Popen(run(folder, state, script),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        wait_until(lambda: len(lines(log)) == 1, timeout=60)
        keeper = keeper_of(proc.pid)
        shims = [int(p) for p in os.listdir("/proc") if p.isdigit()
                 and Path(f"/proc/{p}/stat").exists() and _parent(int(p)) == keeper]  # fmt: skip
        for pid in (proc.pid, keeper):
            os.kill(pid, signal.SIGKILL)
        for pid in shims:
            os.killpg(pid, signal.SIGKILL)  # the shim and its worker
    finally:
        proc.wait(30)
    gate.touch()
    done = subprocess.run(run(folder, state, script), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert lines(log) == ["start a.x", "start a.x", "done a.x"]
    assert rows(state) == {"a.x": ("succeeded", 1, 0)}  # the lost attempt did not count


def _parent(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def shims_of(keeper: int) -> list[int]:
    """The keeper's children: its slots' shims."""
    with open(f"/proc/{keeper}/task/{keeper}/children") as f:
        return [int(pid) for pid in f.read().split()]


def test_a_shim_killed_under_its_worker_ends_that_worker_alone_and_the_slot_goes_on(tmp_path):
    """A slot's shim killed with -9 while its worker runs: the worker's end is unknown, so its
    group is ended and the attempt is the shim's death (a failed attempt, retried, as a worker
    killed under it); the slot's next worker gets a new shim. A shim killed between workers
    costs nothing."""
    script, log, gate = worker(tmp_path)
    backend = LocalBackend([str(script)], str(tmp_path / "state"))
    try:
        thread, results = run_on_a_thread(backend)
        wait_until(lambda: lines(log) == ["start a"], timeout=30)
        keeper = backend._link.process
        (shim_pid,) = shims_of(keeper)
        os.kill(shim_pid, signal.SIGKILL)
        thread.join(30)
        assert not results[0].succeeded and results[0].exit_code == -signal.SIGKILL, results[0]
        gate.touch()
        assert lines(log) == ["start a"]  # its worker was ended with it, never finished
        assert backend.run("b", {"name": "b"}, 1, Cancel()).succeeded  # a new shim runs it
        (idle,) = shims_of(keeper)
        assert idle != shim_pid
        os.kill(idle, signal.SIGKILL)  # between two workers: nothing is lost
        wait_until(lambda: idle not in shims_of(keeper), timeout=30)
        assert backend.run("c", {"name": "c"}, 1, Cancel()).succeeded
        assert lines(log) == ["start a", "start b", "done b", "start c", "done c"]
    finally:
        gate.touch()
        backend.shutdown(1)
        backend.close()


def test_what_a_worker_leaves_running_is_ended_before_the_slot_s_next_worker(tmp_path):
    """A worker that leaves a child running (in its group, or double-forked out of it: the
    shim is a subreaper, so both come back to it) has it ended before its end is reported -
    the slot's next worker never shares its shim with an earlier one's leftovers."""
    marks = tmp_path / "left"
    script = tmp_path / "leaver.sh"
    # the session's shell has its own child when the worker ends: the shell killed, that
    # child comes back to the shim after the shim's list of leftovers was taken
    script.write_text(f"#!/bin/sh\n(sleep 300; echo late >> {marks}) &\n"
                      f"ready={tmp_path}/ready.$$\n"
                      f"setsid sh -c \"sleep 300 & echo up > $ready; wait\n"
                      f"echo late >> {marks}\" &\n"
                      "while [ ! -e $ready ]; do sleep 0.01; done\nexit 0\n")  # fmt: skip
    script.chmod(0o755)
    backend = LocalBackend([str(script)], str(tmp_path / "state"))
    try:
        assert backend.run("a", {"name": "a"}, 1, Cancel()).succeeded
        keeper = backend._link.process
        (shim_pid,) = shims_of(keeper)
        assert shims_of(shim_pid) == []  # nothing of its worker is left under the shim
        assert backend.run("b", {"name": "b"}, 1, Cancel()).succeeded
        assert shims_of(shim_pid) == [] and not marks.exists()
    finally:
        backend.shutdown(1)
        backend.close()


def test_a_worker_that_ends_before_the_adopting_manager_asks_is_in_the_keeper_s_answer(
    tmp_path, monkeypatch
):
    """The keeper takes a later manager's connection, a worker ends, then the manager asks
    what runs: the end belongs in the answer. Sent on its own before it, it was read as the
    answer and the manager died of it (KeyError 'running', once in CI)."""
    script, log, gate = worker(tmp_path)
    backend = LocalBackend([str(script)], str(tmp_path / "state"))
    thread, first = run_on_a_thread(backend)
    wait_until(lambda: lines(log) == ["start a"], timeout=30)
    link = backend._link
    link.conn.shutdown(socket.SHUT_RDWR)  # as if its manager had died
    thread.join(30)
    keepers = tmp_path / "state" / "keepers"
    journal = keepers / f"{link.keeper_id}.journal"
    sockets_before = sockets_of(link.process)
    send = KeeperLink._send

    def end_then_ask(self, message):
        if message.get("op") == wire.ADOPT:
            wait_until(lambda: sockets_of(link.process) - sockets_before, 30)  # taken
            gate.touch()
            wait_until(lambda: b'{"end":' in journal.read_bytes(), 30)
        return send(self, message)

    monkeypatch.setattr(KeeperLink, "_send", end_then_ask)
    try:
        other, running, ended = KeeperLink.adopt(str(keepers), link.keeper_id)
    finally:
        gate.touch()  # (however it went: no worker, so no keeper, is left waiting)
    assert running == [] and [end["code"] for end in ended] == [0]
    assert lines(log) == ["start a", "done a"]
    other.close(wait=0)


def sockets_of(pid: int) -> set[str]:
    """The sockets process `pid` holds open, by inode."""
    held = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:  # closed meanwhile
            continue
        if target.startswith("socket:"):
            held.add(target)
    return held
