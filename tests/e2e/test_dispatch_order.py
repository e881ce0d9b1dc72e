"""Items start in the order the line shows: with more workers than slots (autoscaler bounds
wider than the parallelism in force), 30 waiting items start in exactly the order
`workqueue status --json` lists them, on both backends.

A worker that took an item before it had a slot would hold it while it waited, and the
waiting workers would wake in any order; the dispatcher takes a slot first, then the head of
the line (`manager.runtime.dispatcher`)."""

from __future__ import annotations

import json
import signal
import sys
from types import SimpleNamespace

from tests.support.cluster import apiserver, cluster  # noqa: F401  (fixtures)
from tests.support.in_process_ambassador import in_process_ambassador_server  # noqa: F401  (fixture)
from tests.support.servers import wait_until

from .conftest import spawn_workqueue, workqueue

WORKER = """#!{python}
import json, os, time
name = json.load(open(os.environ["WORK_ITEM_FILE"]))["name"]
with open({started!r}, "a") as f:
    f.write(name + "\\n")
if name.startswith("000"):
    while not os.path.exists({gate!r}):
        time.sleep(0.05)
"""
# Names whose order is not their creation order: the line's order is the source's listing
# (sorted) order, and the first one holds the only slot until the gate opens.
NAMES = ["000-gate.mp4"] + [f"{(k * 7919) % 1000:03d}-{k:02d}.mp4" for k in range(1, 30)]
WIDE = ["--parallelism", "1", "--autoscale", "--min-parallelism", "1", "--max-parallelism",
        "8", "--scale-interval", "1h"]  # fmt: skip


def setup(tmp_path):
    videos = tmp_path / "videos"
    videos.mkdir()
    for name in reversed(NAMES):
        (videos / name).write_bytes(b"x")
    started, gate = tmp_path / "started.txt", tmp_path / "gate.open"
    worker = tmp_path / "worker.py"
    worker.write_text(WORKER.format(python=sys.executable, started=str(started), gate=str(gate)))
    worker.chmod(0o755)
    return videos, SimpleNamespace(path=worker), started, gate


def started_names(path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def line_order(status_args) -> list[str]:
    done = workqueue("status", "--json", *status_args)
    assert done.returncode == 0, done.stderr
    waiting = [i for i in json.loads(done.stdout)["items"] if i.get("position") is not None]
    return [i["name"] for i in sorted(waiting, key=lambda i: i["position"])]


def check_order(run, status_args, started, gate):
    try:
        wait_until(lambda: started_names(started) == ["000-gate.mp4"], timeout=60)
        line = []

        def listed_all():
            line[:] = line_order(status_args)
            return len(line) == 29

        wait_until(listed_all, timeout=30)
        gate.touch()
        wait_until(lambda: len(started_names(started)) == 30, timeout=120)
        assert started_names(started) == ["000-gate.mp4", *line]
        assert line == sorted(line)  # the source's order, as queued
        _, err = run.communicate(timeout=60)
        assert run.returncode == 0, err[-2000:]
    finally:
        gate.touch()
        if run.poll() is None:
            run.send_signal(signal.SIGTERM)
            run.communicate(timeout=60)


def test_local_items_start_in_the_order_status_lists(tmp_path, ambassador_server):
    videos, worker, started, gate = setup(tmp_path)
    server = ambassador_server(videos)
    state = tmp_path / "state"
    run = spawn_workqueue(
        "manager", "--source", server.url, "--worker-cmd", str(worker.path), "--state-dir",
        state, "--once", *WIDE,
    )  # fmt: skip
    check_order(run, ["--state-dir", state], started, gate)


def test_kubernetes_items_start_in_the_order_status_lists(
    tmp_path,
    ambassador_server,
    cluster,  # noqa: F811  (the fixture)
):
    videos, worker, started, gate = setup(tmp_path)
    server = ambassador_server(videos)
    run = spawn_workqueue(*cluster.args(server.url, worker, "--once", *WIDE))
    status_args = [*cluster.queue_args(), "--source", server.url]
    check_order(run, status_args, started, gate)
