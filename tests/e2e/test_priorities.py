"""Priorities end to end with `--parallelism 1`, so the order is visible: on the local backend
with `--priority` rules over a folder (`workqueue run`) and with a Redis sorted set served by
the ambassador whose score changes while its item waits (`workqueue manager`). Each time the paused
queue's `status` positions are read first, and the items then start in exactly that order.
(The Kubernetes backend's: `tests/manager/backends/kubernetes/test_priorities.py`.)"""

from __future__ import annotations

import json
import signal

import pytest

from tests.e2e.conftest import spawn_workqueue, workqueue
from tests.e2e.test_pause import setup, started_names
from tests.support.in_process_ambassador import in_process_ambassador_server  # noqa: F401  (fixture)
from tests.support.servers import free_port, holding, wait_until
from tests.support.stores import unique


def line(*queue_args) -> list[tuple[str, int]]:
    """(name, priority) of the waiting items, by their status position."""
    done = workqueue("status", *queue_args, "--json")
    assert done.returncode == 0, done.stderr
    items = [i for i in json.loads(done.stdout)["items"] if i.get("position")]
    return [(i["name"], i.get("priority", 0)) for i in sorted(items, key=lambda i: i["position"])]


def run_paused(state, source, worker, port, *extra):
    """A run of `source` that starts paused (a first run over nothing made the ledger)."""
    nothing = state.parent / "nothing"
    nothing.mkdir()
    assert workqueue("run", nothing, "--state-dir", state, "--", worker).returncode == 0
    assert workqueue("pause", "--state-dir", state).returncode == 0
    return spawn_workqueue(
        "run", source, "--state-dir", state, "--parallelism", "1",
        "--metrics-port", port, *extra, "--", worker,
    )  # fmt: skip


def finish(run, state) -> None:
    assert workqueue("resume", "--state-dir", state).returncode == 0
    _, err = run.communicate(timeout=120)
    assert run.returncode == 0, err


def test_rules_order_the_local_line_and_status_shows_the_start_order(tmp_path):
    names = ["a.mp4", "b-low.mp4", "c.mp4", "urgent-d.mp4", "e.mp4", "urgent-f.mp4"]
    videos, state, worker, started, gate = setup(tmp_path, names)
    gate.touch()
    port = free_port()
    rules = [
        "--settle",
        "0",
        "--priority",
        "urgent-*=10",
        "--priority",
        "*-low*=-5",
        "--priority",
        "e.*=10",
    ]
    run = run_paused(state, videos, worker, port, *rules)
    try:
        wait_until(lambda: holding(port, len(names)), timeout=60)
        shown = line("--state-dir", state)
        assert shown == [
            ("e.mp4", 10), ("urgent-d.mp4", 10), ("urgent-f.mp4", 10),  # one priority: as seen
            ("a.mp4", 0), ("c.mp4", 0), ("b-low.mp4", -5),
        ]  # fmt: skip
        text = workqueue("status", "--state-dir", state).stdout
        assert "1. e.mp4  priority 10;" in text
        finish(run, state)
    finally:
        if run.poll() is None:
            run.kill()
    assert started_names(started) == [name for name, _ in shown]


@pytest.mark.parametrize("follow", [["--poll-interval", "0.2"], ["--watch"]], ids=["poll", "watch"])
def test_a_redis_sorted_set_orders_the_line_and_a_new_score_moves_a_waiting_item(
    tmp_path, redis_store, ambassador_server, follow
):
    """The long-running manager over HTTP: the listing's `priorities` order its line, and it
    sees a score change on its next poll - or, watching, as the stream's ADDED event."""
    _, state, worker, started, gate = setup(tmp_path, [])
    gate.touch()
    r, key = redis_store.client(), unique("zset")
    server = ambassador_server(f"{redis_store.url}?zset={key}", "--poll-interval", "0.2")
    manager = ["manager", "--source", server.url, "--backend", "local", "--worker-cmd", worker,
               "--state-dir", state, "--parallelism", "1"]  # fmt: skip
    assert workqueue(*manager, "--once").returncode == 0  # nothing listed yet: makes the ledger
    assert workqueue("pause", "--state-dir", state).returncode == 0
    r.zadd(key, {"low": -1, "mid": 0, "high": 5, "later": 0})
    port = free_port()
    run = spawn_workqueue(*manager, *follow, "--metrics-port", port)
    try:
        wait_until(lambda: holding(port, 4), timeout=60)
        shown = line("--state-dir", state)
        assert shown == [("high", 5), ("later", 0), ("mid", 0), ("low", -1)]
        r.zadd(key, {"low": 9})  # it waits: it moves to the head of the line
        shown = wait_until(
            lambda: (now := line("--state-dir", state))[0] == ("low", 9) and now, timeout=60
        )
        assert shown == [("low", 9), ("high", 5), ("later", 0), ("mid", 0)]
        assert workqueue("resume", "--state-dir", state).returncode == 0
        wait_until(lambda: len(started_names(started)) == 4, timeout=120)
    finally:
        run.send_signal(signal.SIGTERM)
        run.wait(timeout=60)
    assert started_names(started) == ["low", "high", "later", "mid"]
