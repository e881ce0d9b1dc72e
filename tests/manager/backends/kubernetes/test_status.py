"""`workqueue status --backend kubernetes` answers from the cluster (the stand-in, through the
official client): counts, reasons read off the pods, the facts the manager left, one item's
pod, and the same JSON schema as the local backend."""

from __future__ import annotations

import json
import signal

import jsonschema

from tests.e2e.conftest import REPO, spawn_workqueue, workqueue
from tests.support.folders import make_items
from tests.support.servers import wait_until

SCHEMA = json.loads((REPO / "docs" / "status.schema.json").read_text())


def status_json(cluster, *extra) -> dict:
    r = workqueue("status", *cluster.queue_args(), "--json", *extra)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_status_from_the_cluster_says_why_pods_do_not_run(
    tmp_path, ambassador_server, marker_worker, cluster
):
    cluster.kubelet.stuck = {"pull-me": "ImagePullBackOff", "huge": "Unschedulable"}
    make_items(tmp_path / "videos", ["a-ok.mp4", "huge.mp4", "pull-me.mp4"])
    server = ambassador_server(tmp_path / "videos")
    args = cluster.args(
        server.url, marker_worker, "--parallelism", "2", "--poll-interval", "0.2", "--grace", "1"
    )
    manager = spawn_workqueue(*args)
    try:

        def settled():  # a-ok done, and the other two dispatched (their Jobs exist)
            body = status_json(cluster)
            counts = body["counts"]
            return body if counts["succeeded"] == 1 and counts["running"] == 2 else None

        def recorded_three():  # cheap to look at: three Jobs, a-ok's done and recorded
            jobs = cluster.objects("jobs")
            done = [j for j in jobs if (j.get("status") or {}).get("succeeded")]
            return len(jobs) == 3 and len(done) == 1 and not done[0]["metadata"].get("finalizers")

        wait_until(recorded_three, timeout=60)  # (each `status` below is a process of its own)
        body = wait_until(settled, timeout=60, interval=0.2)
        jsonschema.validate(body, SCHEMA)
        assert body["counts"] == {
            "pending": 0,
            "running": 2,
            "succeeded": 1,
            "failed": 0,
            "cancelled": 0,
        }
        items = {i["name"]: i for i in body["items"]}
        assert items["pull-me.mp4"]["reason"].startswith(
            "image cannot be pulled (ImagePullBackOff): thumbnailer:1.0"
        )
        assert items["huge.mp4"]["reason"].startswith("waiting for a node (unschedulable)")
        assert "Insufficient cpu" in items["huge.mp4"]["reason"]
        assert items["a-ok.mp4"]["exit_code"] == 0  # read off its pod
        assert body["manager"]["parallelism"] == body["forecast"]["parallelism"] == 2
        one = json.loads(workqueue("status", "pull-me.mp4", *cluster.queue_args(), "--json").stdout)
        pod = one["pod"]
        assert pod["phase"] == "Pending" and one["job"].startswith("thumbs-")
        assert pod["containers"][0]["reason"] == "ImagePullBackOff"
        text = workqueue("status", "huge.mp4", *cluster.queue_args()).stdout
        assert "waiting for a node" in text and "Pending" in text
        # both slots are held by pods that cannot start: a new item waits, first in line
        (tmp_path / "videos" / "late.mp4").write_bytes(b"x")
        listed = status_json(cluster, "--source", server.url)
        late = next(i for i in listed["items"] if i["name"] == "late.mp4")
        assert late["state"] == "pending" and late["position"] == 1
    finally:
        manager.send_signal(signal.SIGTERM)
        manager.wait(timeout=60)
    after = status_json(cluster)
    assert after["manager"] is None and after["forecast"]["parallelism"] is None
