"""A source that suddenly empties never cancels the world (`--cancel-removed`'s guard), with a
real redis-server, a real folder and `workqueue run` as a real process: a `FLUSHALL` and a
`DEL` of the set are held - nothing cancelled, no running worker signalled - while `status`,
`/metrics` and the log say why; items that come back end the hold; `workqueue resume
--accept-removals` acts on it at once; a folder emptied at once is acted on after the hold."""

from __future__ import annotations

import json
import signal

import pytest
import requests

from tests.support.servers import free_port, wait_until
from tests.support.stores import RedisServer, unique

from .conftest import spawn_workqueue, workqueue

WORKER = """#!/bin/sh
name=$(sed -n 's/.*"name":"\\([^"]*\\)".*/\\1/p' "$WORK_ITEM_FILE")
echo "$name" >> {started}
trap 'echo "$name" >> {ended}; exit 143' TERM
while [ ! -e {gate} ]; do sleep 0.05; done
"""


def worker(tmp_path):
    started, ended, gate = tmp_path / "started", tmp_path / "ended", tmp_path / "gate"
    script = tmp_path / "worker.sh"
    script.write_text(WORKER.format(started=started, ended=ended, gate=gate))
    script.chmod(0o755)
    return script, started, ended, gate


def lines(path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def status(state) -> dict:
    done = workqueue("status", "--state-dir", state, "--json")
    return json.loads(done.stdout) if done.returncode == 0 else {}


def metric(port: int, name: str) -> float | None:
    try:
        text = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    except requests.RequestException:
        return None
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return None


def let_go(run, gate) -> None:
    """The gated workers let finish, and the run stopped if it still runs (a test's end)."""
    gate.touch()
    if run.poll() is None:
        run.send_signal(signal.SIGTERM)
        run.wait(30)


def start(source, state, script, port, *extra):
    return spawn_workqueue(
        "run", source, "--state-dir", state, "--parallelism", "2", "--cancel-removed",
        "--metrics-port", port, *extra, "--", script,
    )  # fmt: skip


def test_a_flushall_is_held_then_accepted_and_a_deleted_set_that_comes_back_is_forgiven(
    tmp_path,
):
    redis = RedisServer()  # polled: FLUSHALL sends no keyspace notification anyway
    try:
        r, key = redis.client(), unique("set")
        members = [f"job-{i:02d}" for i in range(20)]
        r.sadd(key, *members)
        script, started, ended, gate = worker(tmp_path)
        state, port = tmp_path / "state", free_port()
        run = start(f"{redis.url}?set={key}", state, script, port, "--removal-hold", "1h",
                    "--poll-interval", "0.5s")  # fmt: skip
        try:
            wait_until(lambda: len(lines(started)) == 2, timeout=30)
            # DEL of the set, then the members back: held, then forgiven - nothing cancelled
            r.delete(key)
            wait_until(lambda: status(state).get("removals_held"), timeout=30)
            r.sadd(key, *members)
            wait_until(lambda: status(state).get("removals_held") is None, timeout=30)
            # FLUSHALL: held, said, counted - and nothing cancelled or signalled
            r.flushall()
            wait_until(lambda: status(state).get("removals_held"), timeout=30)
            body = status(state)
            assert "the source lost 20 of 20 items at once" in body["removals_held"]
            assert body["counts"]["cancelled"] == 0 and body["counts"]["running"] == 2
            assert lines(ended) == []  # no running worker was signalled
            assert metric(port, "workqueue_removals_held") == 20
            text = workqueue("status", "--state-dir", state).stdout
            assert "removals held: the source lost 20 of 20 items at once" in text
            # accepted: the 18 waiting are cancelled and the 2 running ended
            said = workqueue("resume", "--accept-removals", "--state-dir", state)
            assert said.returncode == 0, said.stderr
            assert (
                said.stdout.strip() == f"{state}: removals held by its manager are accepted: "
                "the items that left the source are cancelled now"
            )  # (docs/operations.md shows it)
            out, err = run.communicate(timeout=60)
        finally:
            let_go(run, gate)
        assert run.returncode == 0, err
        assert "20 cancelled (left the source)" in out, out
        assert sorted(lines(ended)) == sorted(lines(started))  # the two running were ended
        assert err.count("the source lost 20 of 20 items at once") == 2  # once per hold
    finally:
        redis.stop()


def test_a_folder_emptied_at_once_is_acted_on_after_the_hold(tmp_path):
    videos = tmp_path / "videos"
    videos.mkdir()
    for i in range(12):
        (videos / f"clip-{i:02d}.mp4").write_bytes(b"x")
    script, started, ended, gate = worker(tmp_path)
    state, port = tmp_path / "state", free_port()
    run = start(videos, state, script, port, "--settle", "0", "--removal-hold", "3s")
    try:
        wait_until(lambda: len(lines(started)) == 2, timeout=30)
        for path in videos.iterdir():
            path.unlink()
        wait_until(lambda: status(state).get("removals_held"), timeout=30)
        assert status(state)["counts"]["cancelled"] == 0
        out, err = run.communicate(timeout=60)  # the hold ends by itself: all cancelled
    finally:
        let_go(run, gate)
    assert run.returncode == 0, err
    assert "12 cancelled (left the source)" in out, out
    assert status(state)["removals_held"] is None


@pytest.mark.parametrize("how", ["kill", "term"])
def test_a_hold_outlives_a_restart_and_its_items_neither_start_nor_cancel(tmp_path, how):
    """Stopped (-9, or SIGTERM) during a hold, the next manager holds on: the items that left
    stay neither started nor cancelled, `status` and the metric say so - until accepted."""
    videos = tmp_path / "videos"
    videos.mkdir()
    for i in range(12):
        (videos / f"clip-{i:02d}.mp4").write_bytes(b"x")
    script, started, ended, gate = worker(tmp_path)
    state, port = tmp_path / "state", free_port()
    args = (videos, state, script, port, "--settle", "0", "--removal-hold", "1h")
    run = start(*args)
    try:
        wait_until(lambda: len(lines(started)) == 2, timeout=30)
        for path in videos.iterdir():
            path.unlink()
        wait_until(lambda: status(state).get("removals_held"), timeout=30)
        run.send_signal(signal.SIGKILL if how == "kill" else signal.SIGTERM)
        run.wait(60)
        port = free_port()  # (slots free beside any adopted worker: none may take a held item)
        run = start(videos, state, script, port, "--settle", "0", "--removal-hold", "1h",
                    "--parallelism", "4")  # fmt: skip
        wait_until(lambda: metric(port, "workqueue_removals_held") == 12, timeout=30)
        body = status(state)
        assert "the source lost 12 of 12 items at once" in body["removals_held"]
        assert body["counts"]["cancelled"] == 0
        waiting = [i for i in body["items"] if i["state"] == "pending"]
        assert waiting and all(i["reason"].startswith("held:") for i in waiting), waiting
        assert len(lines(started)) == 2  # none of them started
        said = workqueue("resume", "--accept-removals", "--state-dir", state)
        assert said.returncode == 0, said.stderr
        out, err = run.communicate(timeout=60)
    finally:
        let_go(run, gate)
    assert run.returncode == 0, err
    assert "12 cancelled (left the source)" in out, out
    assert len(lines(started)) == 2


def test_what_left_while_no_manager_ran_is_a_removal_at_start_and_a_hold_ends_on_time(
    tmp_path,
):
    """A few items gone while no manager ran are cancelled at the next start; a hold recorded
    before a restart is acted on once its time has passed, whoever holds it then."""
    videos = tmp_path / "videos"
    videos.mkdir()
    for i in range(12):
        (videos / f"clip-{i:02d}.mp4").write_bytes(b"x")
    script, started, ended, gate = worker(tmp_path)
    state, port = tmp_path / "state", free_port()
    run = start(videos, state, script, port, "--settle", "0", "--removal-hold", "1h")
    wait_until(lambda: len(lines(started)) == 2, timeout=30)
    run.send_signal(signal.SIGKILL)
    run.wait(60)
    for name in ("clip-10.mp4", "clip-11.mp4"):  # gone while no manager ran: a few
        (videos / name).unlink()
    port = free_port()
    run = start(videos, state, script, port, "--settle", "0", "--removal-hold", "1h")
    try:
        wait_until(lambda: status(state).get("counts", {}).get("cancelled") == 2, timeout=30)
        assert status(state).get("removals_held") is None  # a few: acted on at once
        for path in videos.iterdir():  # then all of it, at once: held ...
            path.unlink()
        wait_until(lambda: status(state).get("removals_held"), timeout=30)
        run.send_signal(signal.SIGKILL)
        run.wait(60)
        # ... and the next manager, whose hold is a second, acts on it: it began long enough ago
        run = start(videos, state, script, free_port(), "--settle", "0", "--removal-hold", "1s")
        out, err = run.communicate(timeout=60)
    finally:
        let_go(run, gate)
    assert run.returncode == 0, err
    final = status(state)
    assert final["counts"]["cancelled"] == 12, json.dumps(final, indent=1) + "\n" + err
    assert final["removals_held"] is None
    assert len(lines(started)) == 2  # the two adopted; nothing else ever started
    # ... and the hold, acted on before their worker was followed, ended them (the run waited)
    assert sorted(lines(ended)) == sorted(lines(started))


def test_a_flush_between_listings_is_held_not_gone_under_a_run(tmp_path):
    """Workers that keep taking items while Redis is flushed: the ones taken next find no
    data before any listing saw the flush - they are the guard's to judge (held with the
    rest), never "gone from the source" one by one (the run said "16 gone" and exit 0)."""
    redis = RedisServer()
    try:
        r, key = redis.client(), unique("set")
        r.sadd(key, *[f"job-{i:02d}" for i in range(20)])
        started = tmp_path / "started"
        script = tmp_path / "worker.sh"
        script.write_text(f"#!/bin/sh\necho x >> {started}\nsleep 0.3\n")
        script.chmod(0o755)
        state, port = tmp_path / "state", free_port()
        run = start(f"{redis.url}?set={key}", state, script, port, "--removal-hold", "1h")
        try:
            wait_until(lambda: len(lines(started)) >= 2, timeout=30)
            r.flushdb()
            wait_until(lambda: status(state).get("removals_held"), timeout=30)
            assert "of 20 items at once" in status(state)["removals_held"]
            said = workqueue("resume", "--accept-removals", "--state-dir", state)
            assert said.returncode == 0, said.stderr
            out, err = run.communicate(timeout=60)
        finally:
            if run.poll() is None:
                run.kill()
                run.wait()
        assert "gone from the source" not in out, out
        assert "cancelled (left the source)" in out, out
    finally:
        redis.stop()
