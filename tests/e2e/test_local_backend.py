"""The local backend end to end: a real ambassador on loopback, the manager as a real process,
workers as real processes. Each worker invocation leaves a marker, so "exactly once" is counted,
not assumed."""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from pathlib import Path

from tests.support.folders import make_items
from tests.support.in_process_ambassador import in_process_ambassador_server  # noqa: F401  (fixture)

from ..conftest import wait_until
from .conftest import ledger_states, manager_args, manager_once, spawn_workqueue, workqueue


def test_every_item_is_processed_exactly_once_and_a_rerun_does_nothing(
    tmp_path, ambassador_server, marker_worker
):
    names = [f"clip-{i:02d}.mp4" for i in range(30)]
    make_items(tmp_path / "videos", names)
    server = ambassador_server(tmp_path / "videos")
    state = tmp_path / "state"
    r = manager_once(server, marker_worker, state, "--parallelism", "3")
    assert r.returncode == 0, r.stderr
    assert "30 items: 30 succeeded, 0 failed" in r.stdout
    assert Counter(marker_worker.started()) == Counter(names)
    assert Counter(marker_worker.ended()) == Counter(names)
    r = manager_once(server, marker_worker, state)
    assert r.returncode == 0
    assert "0 succeeded, 30 already done, 0 failed" in r.stdout
    assert len(marker_worker.started()) == 30
    status = workqueue("status", "--state-dir", state)
    assert "30 items" in status.stdout and "30 succeeded" in status.stdout


def test_a_failing_item_fails_alone_is_retried_and_named(
    tmp_path, ambassador_server, marker_worker
):
    names = ["a.mp4", "will-fail.mp4", "c.mp4"]
    make_items(tmp_path / "videos", names)
    server = ambassador_server(tmp_path / "videos")
    state = tmp_path / "state"
    r = manager_once(server, marker_worker, state, "--max-attempts", "2", "--retry-backoff", "0.05")
    assert r.returncode == 1
    assert "2 succeeded, 1 failed" in r.stdout
    assert "failed: will-fail.mp4 (exit code 7, 2 attempt(s))" in r.stdout
    assert "failing on purpose" in r.stdout  # the tail of its log
    assert Counter(marker_worker.started())["will-fail.mp4"] == 2
    assert sorted(marker_worker.ended()) == ["a.mp4", "c.mp4"]
    assert ledger_states(state) == {
        "a.mp4": "succeeded",
        "c.mp4": "succeeded",
        "will-fail.mp4": "failed",
    }
    # with no attempts left it stays failed on a rerun, until someone asks for it
    r = manager_once(server, marker_worker, state, "--max-attempts", "2")
    assert r.returncode == 1 and Counter(marker_worker.started())["will-fail.mp4"] == 2
    assert workqueue("retry", "will-fail.mp4", "--state-dir", state).returncode == 0
    manager_once(server, marker_worker, state, "--max-attempts", "1")
    assert Counter(marker_worker.started())["will-fail.mp4"] == 3


def test_kill_9_mid_batch_then_restart(tmp_path, ambassador_server, marker_worker):
    names = [f"clip-{i:02d}.mp4" for i in range(16)]
    make_items(tmp_path / "videos", names)
    server = ambassador_server(tmp_path / "videos")
    state = tmp_path / "state"
    env = dict(os.environ, SLEEP="0.4")
    first = spawn_workqueue(
        *manager_args(server.url, marker_worker, state, "--parallelism", "2"), env=env
    )
    wait_until(lambda: len(marker_worker.ended()) >= 4, timeout=30)
    first.kill()
    first.wait()
    succeeded_before = {n for n, s in ledger_states(state).items() if s == "succeeded"}
    assert succeeded_before
    starts_before = Counter(marker_worker.started())
    r = manager_once(server, marker_worker, state, "--parallelism", "2", env=env)
    assert r.returncode == 0, r.stderr
    assert set(ledger_states(state).values()) == {"succeeded"}
    starts_after = Counter(marker_worker.started())
    for name in succeeded_before:  # never ran again once it had succeeded
        assert starts_after[name] == starts_before[name] == 1
    assert set(marker_worker.ended()) == set(names)


def test_sigterm_stops_cleanly_and_leaves_nothing_running(
    tmp_path, ambassador_server, marker_worker
):
    make_items(tmp_path / "videos", ["a.mp4", "b.mp4"])
    server = ambassador_server(tmp_path / "videos")
    state = tmp_path / "state"
    proc = spawn_workqueue(
        *manager_args(server.url, marker_worker, state, "--grace", "0.3"),
        env=dict(os.environ, SLEEP="30"),
    )
    wait_until(lambda: len(marker_worker.started()) == 2, timeout=20)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 143
    assert "SIGTERM" in err
    assert set(ledger_states(state).values()) == {"pending"}
    r = manager_once(server, marker_worker, state)
    assert r.returncode == 0 and sorted(marker_worker.ended()) == ["a.mp4", "b.mp4"]


def test_hostile_names_reach_the_worker_intact_and_never_a_shell(
    tmp_path, ambassador_server, marker_worker
):
    names = [
        'it\'s "quoted" $(touch PWNED).mp4',
        "back`touch PWNED2`tick.mp4",
        "sp ace ; & | > <.mp4",
        "vidéo 視頻 ünïcødé.mp4",
        "tab\tand-dash -rf.mp4",
    ]
    make_items(tmp_path / "videos", names)
    server = ambassador_server(tmp_path / "videos")
    r = manager_once(server, marker_worker, tmp_path / "state", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert sorted(marker_worker.ended()) == sorted(names)
    seen_paths = {e["data"]["path"] for e in marker_worker.events()}
    assert seen_paths == {str(tmp_path / "videos" / n) for n in names}
    assert not list(tmp_path.rglob("PWNED*"))


ITEMS_AT_SCALE = 2_000


def test_thousands_of_items_complete(tmp_path):
    """2,000 items, each a process, through one run: nothing leaks at scale (descriptors -
    twice the usual limit of 1,024 -, threads, keepers, shims' slots). (It ran 10,000, then
    4,000, until the suite's time on two cores had to be kept: the spawns and the shims' forks
    are CPU, and bench/local.py measures 10,000 and more.)"""
    folder = tmp_path / "many"
    folder.mkdir()
    old = 1_000_000_000
    for i in range(ITEMS_AT_SCALE):
        path = folder / f"{i:05d}.x"
        path.touch()
        os.utime(path, (old, old))
    state = tmp_path / "state"
    r = workqueue(
        "run",
        folder,
        "--suffix",
        ".x",
        "--state-dir",
        state,
        "--parallelism",
        "2",
        "--",
        "true",
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"{ITEMS_AT_SCALE} items: {ITEMS_AT_SCALE} succeeded, 0 failed" in r.stdout
    states = ledger_states(state)
    assert len(states) == ITEMS_AT_SCALE and set(states.values()) == {"succeeded"}


def test_user_mistakes_are_one_line_exit_2(tmp_path):
    cases = [
        ("manager", "--source", "localhost:1", "--worker-cmd", "true"),
        ("manager", "--source", "http://127.0.0.1:1", "--worker-cmd", "no-such-cmd-xyz"),
        ("manager", "--source", "http://127.0.0.1:1"),
        ("run", tmp_path / "nope", "--", "true"),
        ("run", tmp_path),
        ("status", "--state-dir", tmp_path / "empty"),
        ("manager", "--source", "http://127.0.0.1:1", "--worker-cmd", "true", "--parallelism", "0"),
    ]
    for args in cases:
        r = workqueue(*args, cwd=tmp_path)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert "Traceback" not in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_watch_mode_runs_a_dropped_file_without_waiting_for_a_poll(
    tmp_path, ambassador_server, marker_worker
):
    make_items(tmp_path / "videos", ["first.mp4"])
    server = ambassador_server(tmp_path / "videos")
    proc = spawn_workqueue(
        *manager_args(
            server.url,
            marker_worker,
            tmp_path / "state",
            "--watch",
            "--poll-interval",
            "60",
            once=False,
        )
    )
    try:
        wait_until(lambda: marker_worker.ended() == ["first.mp4"], timeout=20)
        dropped = time.monotonic()
        (tmp_path / "videos" / "second.mp4").write_bytes(b"x")
        try:
            # well under the 48-72 s a poll would take; a stuck stream renews within ~15 s
            wait_until(lambda: "second.mp4" in marker_worker.ended(), timeout=40)
        except AssertionError:
            import requests

            listed = requests.get(server.url + "/api/v1/items", timeout=5).json()["items"]
            raise AssertionError(
                f"second.mp4 not run; the ambassador lists {listed}; "
                f"markers {marker_worker.events()}"
            ) from None
        assert time.monotonic() - dropped < 45  # a poll would take 48-72 s
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        print(err)  # shown by pytest when the test fails
    assert proc.returncode == 143
    assert sorted(marker_worker.ended()) == ["first.mp4", "second.mp4"]


def test_timeout_ends_the_whole_process_group(tmp_path, ambassador_server):
    make_items(tmp_path / "videos", ["slow.mp4"])
    server = ambassador_server(tmp_path / "videos")
    pid_file = tmp_path / "child.pid"
    worker = tmp_path / "slow-worker.sh"
    worker.write_text(f"#!/bin/sh\nsleep 60 &\necho $! > {pid_file}\nsleep 60\n")
    worker.chmod(0o755)
    r = manager_once(server, worker, tmp_path / "state", "--timeout", "0.5", "--max-attempts", "1")
    assert r.returncode == 1
    assert "failed: slow.mp4 (timed out after 0.5s" in r.stdout
    child = int(pid_file.read_text())

    def gone() -> bool:  # exited (or a zombie waiting for its reaper)
        try:
            stat = Path(f"/proc/{child}/stat").read_text()
        except FileNotFoundError:
            return True
        return stat.rsplit(")", 1)[1].split()[0] == "Z"

    wait_until(gone)


def test_what_a_worker_leaves_running_is_ended_when_it_exits(tmp_path):
    """A worker that succeeds but leaves a background child: the child is ended with the
    worker's process group (a daemon must detach on purpose)."""
    make_items(tmp_path / "videos", ["a.mp4"])
    pids = tmp_path / "pids"
    worker = tmp_path / "leaves-a-child.sh"
    worker.write_text(f'#!/bin/sh\nsleep 300 &\necho $! >> "{pids}"\nexit 0\n')
    worker.chmod(0o755)
    r = workqueue("run", tmp_path / "videos", "--state-dir", tmp_path / "state", "--settle", "0",
                  "--", worker)  # fmt: skip
    assert r.returncode == 0, r.stderr
    child = int(pids.read_text().split()[0])

    def ended() -> bool:
        try:
            with open(f"/proc/{child}/status") as f:
                return any(line.split()[1] == "Z" for line in f if line.startswith("State:"))
        except FileNotFoundError:
            return True

    wait_until(ended, timeout=10)


RETRIED_WORKER = """#!/bin/sh
name=$(sed -n 's/.*"name": *"\\([^"]*\\)".*/\\1/p' "$WORK_ITEM_FILE")
echo "$name" >> {ran}
case "$name" in
  slow.txt) while [ ! -e {gate} ]; do sleep 0.05; done ;;
  bad.txt) [ -e {fixed} ] || exit 3 ;;
esac
"""


def test_retry_while_a_run_runs_is_run_by_that_run(tmp_path):
    """`workqueue retry NAME` while `workqueue run` is still running: the run takes the
    request and runs the item again before it ends (as it says), not the next run."""
    items = tmp_path / "items"
    items.mkdir()
    for name in ("bad.txt", "slow.txt"):
        (items / name).write_text(name)
    ran, gate, fixed = tmp_path / "ran", tmp_path / "gate", tmp_path / "fixed"
    worker = tmp_path / "worker.sh"
    worker.write_text(RETRIED_WORKER.format(ran=ran, gate=gate, fixed=fixed))
    worker.chmod(0o755)
    state = tmp_path / "state"
    run = spawn_workqueue(
        "run",
        items,
        "--suffix",
        ".txt",
        "--settle",
        "0",
        "--max-attempts",
        "1",
        "--parallelism",
        "2",
        "--state-dir",
        state,
        "--",
        worker,
    )
    try:
        wait_until(lambda: '"failed": 1' in workqueue("status", "--state-dir", state,
                                                      "--json").stdout, timeout=60)  # fmt: skip
        fixed.touch()
        asked = workqueue("retry", "bad.txt", "--state-dir", state)
        assert asked.returncode == 0 and "the running manager will run it again" in asked.stdout
        wait_until(lambda: ran.read_text().split().count("bad.txt") == 2, timeout=60)
        gate.touch()
        out, err = run.communicate(timeout=60)
    finally:
        gate.touch()
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 0, out + err
    assert "2 items: 2 succeeded, 0 failed" in out, out
