"""`--from-state` on a Kubernetes queue: `stability`, `simulate` and `plan` measure the service
times of the queue's own record and Jobs (through the backend registry), after a real run on
the API-server stand-in - a user of the Kubernetes backend plans from their own history."""

from __future__ import annotations

import json

from tests.e2e.conftest import workqueue
from tests.support.folders import make_items


def test_the_planning_commands_measure_a_kubernetes_queue(
    tmp_path, ambassador_server, marker_worker, cluster, monkeypatch
):
    make_items(tmp_path / "videos", [f"clip-{i}.mp4" for i in range(4)])
    server = ambassador_server(tmp_path / "videos")
    monkeypatch.setenv("SLEEP", "1.2")  # the test kubelet runs the pods: its environment
    r = workqueue(*cluster.args(server.url, marker_worker, "--once", "--parallelism", "2"))
    assert r.returncode == 0, r.stderr
    queue = [*cluster.queue_args(), "--backend", "kubernetes"]

    r = workqueue("stability", "--from-state", *queue, "--arrivals", "600/h", "--json")
    assert r.returncode == 0, r.stderr
    body = json.loads(r.stdout)
    measured = body["measured"]
    assert measured["services"] == 4  # the API gives whole seconds:
    assert measured["service_seconds"] >= 1
    assert measured["arrivals"] == 0  # a Job's creation is its dispatch: no arrival times

    r = workqueue("plan", "--items", "100", "--from-state", *queue, "--deadline", "1h", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["service_seconds"] >= 1

    r = workqueue("simulate", "--from-state", *queue, "--parallelism", "2", "--items", "50",
                  "--interarrival", "1s", "--json")  # fmt: skip
    assert r.returncode == 0, r.stderr
    r = workqueue("simulate", "--from-state", *queue, "--parallelism", "2")
    assert r.returncode == 2 and "no arrival times" in r.stderr

    r = workqueue("stability", "--from-state", str(tmp_path), *queue, "--arrivals", "1/s")
    assert r.returncode == 2 and "keeps no state directory" in r.stderr
