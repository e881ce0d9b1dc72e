"""`--cancel-removed` on the local backend, with real processes and the real (in-process)
ambassador: a file removed while its item waits never runs, one removed while it runs is ended
(its whole process group), both end `cancelled`; without the flag removal changes nothing; a
cancelled item whose file comes back runs again."""

from __future__ import annotations

import json
import os
import signal
import sys

import requests

from tests.support.servers import free_port, wait_until

from .conftest import spawn_workqueue, workqueue

WORKER = """#!{python}
import json, os, subprocess, sys, time
name = json.load(open(os.environ["WORK_ITEM_FILE"]))["name"]
with open({started!r}, "a") as f:
    f.write(name + "\\n")
if "long" in name:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    with open({pids!r}, "a") as f:
        f.write(str(child.pid) + "\\n")
    time.sleep(300)
while "gate" in name and not os.path.exists({gate!r}):
    time.sleep(0.05)
"""


def setup(tmp_path, names):
    videos = tmp_path / "videos"
    videos.mkdir()
    for name in names:
        (videos / name).write_bytes(b"x")
    started, gate, pids = tmp_path / "started.txt", tmp_path / "gate.open", tmp_path / "pids"
    worker = tmp_path / "worker.py"
    worker.write_text(
        WORKER.format(python=sys.executable, started=str(started), gate=str(gate), pids=str(pids))
    )
    worker.chmod(0o755)
    return videos, tmp_path / "state", worker, started, gate, pids


def started_names(path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def status(state) -> dict:
    body = json.loads(workqueue("status", "--state-dir", state, "--json").stdout)
    return {"counts": body["counts"], "items": {i["name"]: i for i in body["items"]}}


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie has ended: only its parent must reap it
        return f.read().rsplit(")", 1)[1].split()[0] != "Z"


def test_removed_while_waiting_never_runs_and_removed_while_running_is_ended(tmp_path):
    videos, state, worker, started, gate, pids = setup(
        tmp_path, ["a-long.mp4", "b-gate.mp4", "c.mp4"]
    )
    port = free_port()
    run = spawn_workqueue(
        "run", videos, "--state-dir", state, "--parallelism", "2", "--settle", "0",
        "--cancel-removed", "--metrics-port", port, "--", worker,
    )  # fmt: skip
    try:
        wait_until(lambda: sorted(started_names(started)) == ["a-long.mp4", "b-gate.mp4"], 30)
        wait_until(lambda: pids.exists() and pids.read_text().strip(), 30)
        child = int(pids.read_text().split()[0])
        (videos / "c.mp4").unlink()  # waiting for a slot: must never start
        wait_until(lambda: status(state)["counts"]["cancelled"] == 1, timeout=30)
        (videos / "a-long.mp4").unlink()  # running: its process group is ended
        wait_until(lambda: status(state)["counts"]["cancelled"] == 2, timeout=30)
        wait_until(lambda: not alive(child), timeout=15)  # the worker's own child too
        text = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
        assert 'workqueue_items{state="cancelled"} 2.0' in text
        assert 'workqueue_item_duration_seconds_count{outcome="cancelled"} 1.0' in text
        gate.touch()
        out, err = run.communicate(timeout=60)
    finally:
        gate.touch()
        if run.poll() is None:
            run.send_signal(signal.SIGTERM)
            run.wait(timeout=30)
    assert run.returncode == 0, err
    assert "1 succeeded" in out and "2 cancelled (left the source)" in out
    assert sorted(started_names(started)) == ["a-long.mp4", "b-gate.mp4"]  # c never ran
    after = status(state)
    assert after["counts"] == {
        "pending": 0, "running": 0, "succeeded": 1, "failed": 0, "cancelled": 2
    }  # fmt: skip
    items = after["items"]
    assert items["c.mp4"]["state"] == "cancelled" and items["c.mp4"]["attempts"] == 0
    assert "left the source before it started" in items["c.mp4"]["reason"]
    assert items["a-long.mp4"]["state"] == "cancelled" and items["a-long.mp4"]["attempts"] == 1
    assert "attempt 1 ended" in items["a-long.mp4"]["reason"]

    # The file comes back: the cancelled item is work again, and runs.
    (videos / "c.mp4").write_bytes(b"x")
    gate.touch()
    r = workqueue("run", videos, "--state-dir", state, "--settle", "0", "--", worker)
    assert r.returncode == 0, r.stderr
    assert started_names(started).count("c.mp4") == 1
    assert status(state)["items"]["c.mp4"]["state"] == "succeeded"


def test_without_the_flag_a_removed_file_changes_nothing(tmp_path):
    videos, state, worker, started, gate, _ = setup(tmp_path, ["a-gate.mp4", "b-gate.mp4"])
    run = spawn_workqueue(
        "run", videos, "--state-dir", state, "--parallelism", "1", "--settle", "0", "--", worker
    )
    try:
        wait_until(lambda: started_names(started) == ["a-gate.mp4"], timeout=30)
        (videos / "a-gate.mp4").unlink()
        wait_until(lambda: status(state)["counts"]["running"] == 1, timeout=10)
        gate.touch()
        out, err = run.communicate(timeout=60)
    finally:
        gate.touch()
        if run.poll() is None:
            run.kill()
    assert run.returncode == 0, err
    assert "2 succeeded" in out and "cancelled" not in out
    assert status(state)["counts"]["cancelled"] == 0
