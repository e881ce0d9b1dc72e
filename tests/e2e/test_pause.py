"""`workqueue pause` / `resume` on the local backend, with real processes: running work
finishes, nothing new starts, the state survives a restart, and a --once run waits and carries
on - or, if nobody resumes, says so and ends after --wait-for; `retry --failed` /
`--matching`."""

from __future__ import annotations

import json
import signal
import sys

from tests.support.servers import free_port, holding, wait_until

from .conftest import spawn_workqueue, workqueue

WORKER = """#!{python}
import json, os, sys, time
name = json.load(open(os.environ["WORK_ITEM_FILE"]))["name"]
with open({started!r}, "a") as f:
    f.write(name + "\\n")
if "gate" in name:
    while not os.path.exists({gate!r}):
        time.sleep(0.05)
if "bad" in name:
    sys.exit(4)
"""


def setup(tmp_path, names):
    videos = tmp_path / "videos"
    videos.mkdir()
    for name in names:
        (videos / name).write_bytes(b"x")
    started, gate = tmp_path / "started.txt", tmp_path / "gate.open"
    worker = tmp_path / "worker.py"
    worker.write_text(WORKER.format(python=sys.executable, started=str(started), gate=str(gate)))
    worker.chmod(0o755)
    return videos, tmp_path / "state", worker, started, gate


def started_names(path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def manager(state) -> dict:
    """The facts the running manager left: what it has in force (not what was asked)."""
    done = workqueue("status", "--state-dir", state, "--json")
    return (json.loads(done.stdout).get("manager") or {}) if done.returncode == 0 else {}


def counts(state) -> dict:
    return json.loads(workqueue("status", "--state-dir", state, "--json").stdout)["counts"]


def run_one_at_a_time(videos, state, worker):
    """`workqueue run` at parallelism 1 that waits up to 10 minutes for the queue to let it
    finish (a pause or a scale to 0 does not end it)."""
    return spawn_workqueue("run", videos, "--state-dir", state, "--parallelism", "1",
                           "--settle", "0", "--wait-for", "10m", "--", worker)  # fmt: skip


def test_pause_while_running_lets_running_work_finish_and_starts_nothing_new(tmp_path):
    videos, state, worker, started, gate = setup(tmp_path, ["a-gate.mp4", "b.mp4", "c.mp4"])
    run = run_one_at_a_time(videos, state, worker)  # paused: it waits for the resume
    try:
        wait_until(lambda: started_names(started) == ["a-gate.mp4"], timeout=30)
        r = workqueue("pause", "--state-dir", state)
        assert r.returncode == 0 and "paused" in r.stdout
        wait_until(lambda: manager(state).get("paused_since"), timeout=30)  # in force there
        gate.touch()  # the running item finishes ...
        wait_until(lambda: counts(state)["succeeded"] == 1, timeout=30)
        assert started_names(started) == ["a-gate.mp4"]  # ... and nothing new starts
        body = json.loads(workqueue("status", "--state-dir", state, "--json").stdout)
        assert body["paused_since"] is not None
        assert all(i["reason"].startswith("waiting: the queue is paused") for i in body["items"]
                   if i["state"] == "pending")  # fmt: skip
        r = workqueue("resume", "--state-dir", state)
        assert r.returncode == 0 and "resumed" in r.stdout
        out, err = run.communicate(timeout=60)
        assert run.returncode == 0, err
        assert err.count("queue paused since") == 1 and "queue resumed" in err
    finally:
        gate.touch()
        if run.poll() is None:
            run.send_signal(signal.SIGTERM)
            run.wait(timeout=30)
    assert sorted(started_names(started)) == ["a-gate.mp4", "b.mp4", "c.mp4"]


def test_a_paused_queue_stays_paused_across_a_restart_and_a_once_run_waits(tmp_path):
    videos, state, worker, started, gate = setup(tmp_path, ["a.mp4", "b.mp4"])
    gate.touch()
    r = workqueue("run", videos, "--state-dir", state, "--settle", "0", "--", worker)
    assert r.returncode == 0
    for name in ("c.mp4", "d.mp4"):
        (videos / name).write_bytes(b"x")
    assert workqueue("pause", "--state-dir", state).returncode == 0
    port = free_port()
    run = spawn_workqueue(
        "run", videos, "--state-dir", state, "--settle", "0", "--metrics-port", port,
        "--wait-for", "10m", "--", worker,
    )  # fmt: skip
    try:
        # The manager's own word that it holds: both new items in its line, the queue paused
        # - so nothing started below is the pause, not a manager that has not begun.
        wait_until(lambda: holding(port, 2), timeout=30)
        assert sorted(started_names(started)) == ["a.mp4", "b.mp4"]  # paused across restart
        assert workqueue("resume", "--state-dir", state).returncode == 0
        out, err = run.communicate(timeout=60)
        assert run.returncode == 0, err
        assert err.count("queue paused since") == 1
    finally:
        if run.poll() is None:
            run.kill()
    assert sorted(started_names(started)) == ["a.mp4", "b.mp4", "c.mp4", "d.mp4"]


def test_a_once_run_on_a_queue_that_stays_paused_says_so_and_ends(tmp_path):
    """Paused, and nobody resumes it: the run says why once, and ends after --wait-for with
    exit 4 (it waited for ever) - what ran before is kept, what waits waits in the ledger."""
    videos, state, worker, started, gate = setup(tmp_path, ["a.mp4"])
    assert workqueue("run", videos, "--state-dir", state, "--settle", "0", "--", worker)\
        .returncode == 0  # fmt: skip
    (videos / "b.mp4").write_bytes(b"x")
    assert workqueue("pause", "--state-dir", state).returncode == 0
    done = workqueue("run", videos, "--state-dir", state, "--settle", "0", "--wait-for", "1s",
                     "--", worker)  # fmt: skip
    assert done.returncode == 4, done.stderr
    assert "2 items: 0 succeeded, 1 already done, 0 failed, 1 not run" in done.stdout
    assert ("not run: the queue is paused: 1 item waits (`workqueue resume` releases them)"
            in done.stdout)  # fmt: skip
    assert done.stderr.count("waiting: the queue is paused") == 1
    assert started_names(started) == ["a.mp4"]
    assert counts(state)["pending"] == 1


def test_retry_failed_and_matching(tmp_path):
    names = ["bad-1.mp4", "bad-2.mp4", "other-bad.mp4", "ok.mp4"]
    videos, state, worker, started, gate = setup(tmp_path, names)
    args = ["run", videos, "--state-dir", state, "--settle", "0", "--max-attempts", "1"]
    r = workqueue(*args, "--", worker)
    assert r.returncode == 1 and counts(state)["failed"] == 3
    r = workqueue("retry", "--matching", "bad-*", "--state-dir", state)
    assert (
        r.returncode == 0 and r.stdout.strip() == "2 item(s) will run again: bad-1.mp4, bad-2.mp4"
    )
    assert counts(state) == {
        "pending": 2,
        "running": 0,
        "succeeded": 1,
        "failed": 1,
        "cancelled": 0,
    }
    r = workqueue("retry", "--failed", "--state-dir", state)
    assert r.stdout.strip() == "1 item(s) will run again: other-bad.mp4"
    r = workqueue("retry", "--failed", "--state-dir", state)
    assert r.returncode == 0 and r.stdout.strip() == "nothing to retry: no failed item"
    r = workqueue("retry", "ok.mp4", "--failed", "--state-dir", state)
    assert r.returncode == 2 and "give the item's NAME, or --failed" in r.stderr


def test_scale_changes_a_running_local_manager_and_zero_starts_nothing(tmp_path):
    names = [f"{c}-gate.mp4" for c in "abcdef"]
    videos, state, worker, started, gate = setup(tmp_path, names)
    run = run_one_at_a_time(videos, state, worker)  # at parallelism 0: it waits for the scale
    try:
        wait_until(lambda: len(started_names(started)) == 1, timeout=30)
        r = workqueue("scale", "--parallelism", "3", "--state-dir", state)
        assert r.returncode == 0 and "parallelism 3 (none asked before)" in r.stdout, r.stderr
        wait_until(lambda: len(started_names(started)) == 3, timeout=30)  # more workers too
        r = workqueue("scale", "--parallelism", "0", "--state-dir", state)
        assert "parallelism 0 (was 3): nothing new starts" in r.stdout
        wait_until(lambda: manager(state).get("parallelism") == 0, timeout=30)  # in force
        gate.touch()  # the running three finish ...
        wait_until(lambda: counts(state)["succeeded"] == 3, timeout=30)
        assert len(started_names(started)) == 3  # ... and nothing new starts
        body = json.loads(workqueue("status", "--state-dir", state, "--json").stdout)
        assert any("parallelism is 0" in i["reason"] for i in body["items"])
        workqueue("scale", "--parallelism", "2", "--state-dir", state)
        out, err = run.communicate(timeout=60)
        assert run.returncode == 0, err
        assert "parallelism 1 -> 3, as asked" in err and "parallelism 0 -> 2, as asked" in err
    finally:
        gate.touch()
        if run.poll() is None:
            run.send_signal(signal.SIGTERM)
            run.wait(timeout=30)
    assert sorted(started_names(started)) == sorted(names)
    bad = workqueue("scale", "--parallelism", "-1", "--state-dir", state)
    assert bad.returncode == 2 and "must be a whole number >= 0" in bad.stderr
