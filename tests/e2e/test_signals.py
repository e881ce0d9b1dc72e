"""Stop signals, with `workqueue run` as a real process: a closed terminal (SIGHUP) stops it as
SIGTERM does - running work finishes within the grace period, nothing is left running - and a
signal that comes while it starts ends it with one line saying nothing ran. A parallelism
asked of a running queue beyond the bounds is refused in the log, the current kept."""

from __future__ import annotations

import json
import os
import signal
import threading

from tests.support.servers import wait_until

from .conftest import spawn_workqueue, workqueue

WORKER = """#!/bin/sh
echo start >> {log}
while [ ! -e {gate} ]; do sleep 0.05; done
echo done >> {log}
"""


def setup(tmp_path, count: int):
    videos = tmp_path / "videos"
    videos.mkdir()
    for i in range(count):
        (videos / f"clip-{i}.mp4").write_bytes(b"x")
    log, gate = tmp_path / "log", tmp_path / "gate"
    worker = tmp_path / "worker.sh"
    worker.write_text(WORKER.format(log=log, gate=gate))
    worker.chmod(0o755)
    return videos, worker, log, gate


def lines(path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def status(state) -> dict:
    done = workqueue("status", "--state-dir", state, "--json")
    return json.loads(done.stdout) if done.returncode == 0 else {}


def test_sighup_stops_as_sigterm_does_running_work_finishing_in_its_grace(tmp_path):
    videos, worker, log, gate = setup(tmp_path, 4)
    state = tmp_path / "state"
    run = spawn_workqueue("run", videos, "--state-dir", state, "--parallelism", "2",
                          "--settle", "0", "--grace", "60s", "--", worker)  # fmt: skip
    said: list[str] = []
    reader = threading.Thread(target=lambda: said.extend(run.stderr), daemon=True)
    try:
        wait_until(lambda: lines(log) == ["start", "start"], timeout=30)
        reader.start()
        run.send_signal(signal.SIGHUP)
        wait_until(lambda: any("SIGHUP: stopping" in line for line in said), timeout=30)
        gate.touch()  # the two running finish within the grace period
        run.wait(60)
        reader.join(30)
        err = "".join(said)
    finally:
        gate.touch()
        if run.poll() is None:
            run.kill()
    assert run.returncode == 128 + signal.SIGHUP, err
    assert "SIGHUP: stopping" in err
    assert lines(log) == ["start", "start", "done", "done"]  # finished, and nothing new
    body = status(state)
    assert body["counts"]["succeeded"] == 2 and body["counts"]["running"] == 0
    assert body["manager"] is None


def test_a_signal_while_starting_is_one_line_saying_nothing_ran(tmp_path):
    videos, worker, log, _ = setup(tmp_path, 0)
    (videos / "fresh.mp4").write_bytes(b"x")  # settling for a minute: the run waits for it
    run = spawn_workqueue("run", videos, "--state-dir", tmp_path / "state", "--settle", "60s",
                          "--", worker)  # fmt: skip
    try:
        # started, and watching its folder (a thread of its own): past every import
        wait_until(lambda: len(os.listdir(f"/proc/{run.pid}/task")) > 1, timeout=30)
        run.send_signal(signal.SIGTERM)
        out, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 128 + signal.SIGTERM
    assert err.strip().splitlines() == [
        "workqueue run: stopped by SIGTERM while starting: nothing ran"
    ], err
    assert lines(log) == []


def test_a_parallelism_beyond_the_bounds_is_refused_and_the_current_kept(tmp_path):
    videos, worker, log, gate = setup(tmp_path, 3)
    state = tmp_path / "state"
    run = spawn_workqueue("run", videos, "--state-dir", state, "--parallelism", "1",
                          "--settle", "0", "--", worker)  # fmt: skip
    try:
        wait_until(lambda: lines(log) == ["start"], timeout=30)
        (state / "parallelism").write_text('{"parallelism": 100000000}')  # a hand's typo
        wait_until(lambda: (status(state).get("manager") or {}).get("parallelism_refused"), 30)
        assert status(state)["manager"]["parallelism"] == 1  # kept
        r = workqueue("scale", "--parallelism", "2", "--state-dir", state)  # a sound one after
        assert r.returncode == 0, r.stderr
        wait_until(lambda: (status(state).get("manager") or {}).get("parallelism") == 2, 30)
        gate.touch()
        out, err = run.communicate(timeout=60)
    finally:
        gate.touch()
        if run.poll() is None:
            run.kill()
    assert run.returncode == 0, err
    assert "parallelism asked of the queue refused (must be at most 4096: 100000000)" in err
    assert "can't start new thread" not in err
