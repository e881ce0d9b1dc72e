"""`workqueue status` on a real run: the JSON object checked against docs/status.schema.json,
reasons, positions and predicted starts while a manager runs, one item with its log tail, and
what is said when no manager runs."""

from __future__ import annotations

import json
import signal
import sys

import jsonschema
import pytest

from tests.support.in_process_ambassador import in_process_ambassador_server  # noqa: F401  (fixture)
from tests.support.servers import wait_until

from .conftest import REPO, spawn_workqueue, workqueue

SCHEMA = json.loads((REPO / "docs" / "status.schema.json").read_text())

WORKER = """#!{python}
import json, os, sys, time
name = json.load(open(os.environ["WORK_ITEM_FILE"]))["name"]
if "gate" in name:
    while not os.path.exists({gate!r}):
        time.sleep(0.05)
if name.startswith("bad"):
    print("no such codec", file=sys.stderr)
    sys.exit(5)
time.sleep(0.3)
"""


def status(state, *extra) -> dict:
    r = workqueue("status", "--state-dir", state, "--json", *extra)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.fixture
def gated_run(tmp_path):
    videos, state, gate = tmp_path / "videos", tmp_path / "state", tmp_path / "gate.open"
    videos.mkdir()
    # dispatch order is by name: a quick failure and a quick success first (so a service time
    # is measured), then the gate holding the only slot, then three waiting
    for name in ("b-ok.mp4", "bad-a.mp4", "c-gate.mp4", "d-1.mp4", "e-2.mp4", "f-3.mp4"):
        (videos / name).write_bytes(b"x")
    worker = tmp_path / "worker.py"
    worker.write_text(WORKER.format(python=sys.executable, gate=str(gate)))
    worker.chmod(0o755)
    return videos, state, gate, worker


def test_status_json_while_a_manager_runs_and_after(gated_run):
    videos, state, gate, worker = gated_run
    run = spawn_workqueue(
        "run", videos, "--suffix", ".mp4", "--state-dir", state, "--parallelism", "1",
        "--max-attempts", "1", "--settle", "0", "--", worker,
    )  # fmt: skip
    try:

        def gate_running():
            if not (state / "ledger.sqlite3").exists():
                return None
            r = workqueue("status", "--state-dir", state, "--json")
            if r.returncode != 0:
                return None
            body = json.loads(r.stdout)
            return (
                body if body["counts"]["running"] == 1 and body["counts"]["failed"] == 1 else None
            )

        body = wait_until(gate_running, timeout=30, interval=0.1)
        jsonschema.validate(body, SCHEMA)
        items = {i["name"]: i for i in body["items"]}
        assert body["counts"] == {
            "pending": 3,
            "running": 1,
            "succeeded": 1,
            "failed": 1,
            "cancelled": 0,
        }
        assert items["c-gate.mp4"]["reason"].startswith("running since ")
        line = sorted((i for i in body["items"] if "position" in i), key=lambda i: i["position"])
        assert [i["name"] for i in line] == ["d-1.mp4", "e-2.mp4", "f-3.mp4"]
        assert all(i["reason"] == "waiting for a free slot" for i in line)
        etas = [i["eta_seconds"] for i in line]
        assert all(e is not None for e in etas) and etas == sorted(etas)  # measured: predicted
        assert items["bad-a.mp4"]["reason"] == "failed with exit code 5 after 1 attempt"
        assert items["bad-a.mp4"]["exit_code"] == 5
        assert body["manager"]["parallelism"] == body["forecast"]["parallelism"] == 1
        assert body["forecast"]["service_seconds"] > 0
        assert body["forecast"]["drain_seconds"] >= etas[-1]
        # one item: its state and the tail of its log
        one = json.loads(workqueue("status", "bad-a.mp4", "--state-dir", state, "--json").stdout)
        assert one["state"] == "failed" and "no such codec" in one["log_tail"][-1]
        text = workqueue("status", "--state-dir", state).stdout
        assert "waiting (3, in order):" in text and "1. d-1.mp4  starts in" in text
        gate.touch()
        assert run.wait(timeout=60) == 1
    finally:
        gate.touch()
        if run.poll() is None:
            run.send_signal(signal.SIGTERM)
            run.wait(timeout=30)
    after = status(state)
    jsonschema.validate(after, SCHEMA)
    assert after["counts"] == {
        "pending": 0,
        "running": 0,
        "succeeded": 5,
        "failed": 1,
        "cancelled": 0,
    }
    assert after["manager"] is None and after["forecast"]["parallelism"] is None
    assert after["forecast"]["recommended_parallelism"] is None  # no manager: no parallelism
    r = workqueue("status", "--state-dir", state)
    assert "manager: none is running this queue" in r.stdout


def test_one_unknown_item_is_one_line_and_exit_2(tmp_path, gated_run):
    videos, state, gate, worker = gated_run
    gate.touch()
    r = workqueue("run", videos, "--state-dir", state, "--max-attempts", "1", "--", worker)
    assert r.returncode == 1
    r = workqueue("status", "nope.mp4", "--state-dir", state)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        f"workqueue status: error: no item named 'nope.mp4' in {state}"
    ]


def test_the_dashboard_and_status_give_one_forecast_at_one_moment(tmp_path, ambassador_server):
    """Items that arrive over time (so there is an arrival rate), one held running: at that
    moment nothing changes, and the dashboard's board.json and `status --json` must agree."""
    import time

    import requests

    from tests.support.servers import free_port

    videos, state, gate = tmp_path / "videos", tmp_path / "state", tmp_path / "gate.open"
    videos.mkdir()
    worker = tmp_path / "worker.py"
    worker.write_text(WORKER.format(python=sys.executable, gate=str(gate)))
    worker.chmod(0o755)
    source = ambassador_server(videos, "--suffix", ".mp4")
    port = free_port()
    run = spawn_workqueue(
        "manager", "--source", source.url, "--worker-cmd", str(worker), "--state-dir", state,
        "--poll-interval", "0.5s", "--parallelism", "1", "--metrics-port", port,
    )  # fmt: skip
    try:

        def seen() -> int:  # items the manager has listed (0 before its ledger exists)
            r = workqueue("status", "--state-dir", state, "--json")
            return sum(json.loads(r.stdout)["counts"].values()) if r.returncode == 0 else 0

        for count, name in enumerate(("a-1.mp4", "b-2.mp4", "c-3.mp4", "d-gate.mp4"), 1):
            (videos / name).write_bytes(b"x")  # each seen before the next: a rate, not a burst
            wait_until(lambda n=count: seen() >= n, timeout=60)
        wait_until(lambda: status(state)["counts"]["succeeded"] == 3, timeout=60)
        wait_until(lambda: status(state)["counts"]["running"] == 1, timeout=30)
        time.sleep(0.6)  # past the dashboard's half-second cache
        board = requests.get(f"http://127.0.0.1:{port}/ui/board.json", timeout=5).json()
        mine = status(state)
        theirs = board["forecast"]
        for key in ("utilization", "verdict", "recommended_parallelism", "service_seconds",
                    "interarrival_seconds", "parallelism"):  # fmt: skip
            assert mine["forecast"][key] == theirs[key], (key, mine["forecast"], theirs)
        assert mine["forecast"]["utilization"] is not None  # there is a rate to speak of
        assert mine["counts"] == board["counts"]
    finally:
        gate.touch()
        run.send_signal(signal.SIGTERM)
        run.communicate(timeout=60)


def test_json_with_waiting_prints_the_head_of_the_line_and_counts_the_rest(tmp_path):
    """`status --json --waiting N`: every item not in line, the first N in line (their
    positions 1..N), and how many more wait - checked against the schema; without --waiting,
    every item, as before."""
    from kube_workqueue.manager.backends.local.ledger import SqliteLedger

    state = tmp_path / "state"
    with SqliteLedger(str(state)).open() as ledger:
        ledger.see([f"item-{i:03d}.x" for i in range(50)])
        ledger.start("item-000.x", "/log")
        ledger.finish("item-000.x", True, 0, None)
    head = status(state, "--waiting", "3")
    jsonschema.validate(head, SCHEMA)
    waiting = [i for i in head["items"] if i["state"] == "pending"]
    assert [i["position"] for i in waiting] == [1, 2, 3] and head["items_left_out"] == 46
    assert any(i["state"] == "succeeded" for i in head["items"])
    whole = status(state)
    jsonschema.validate(whole, SCHEMA)
    assert len(whole["items"]) == 50 and "items_left_out" not in whole
