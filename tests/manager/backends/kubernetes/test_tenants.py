"""Group limits, rates and fair share on the Kubernetes backend (the API-server stand-in and its
kubelet), one Job per item and in batches (Indexed Jobs), judged by the workers' own marks: a
group's limit is reached and never passed (a batch never holds more of a group than its free
limit), a rate's period never holds more starts; `scale` and the WorkQueue's spec change the
limits while the manager runs."""

from __future__ import annotations

import json
from collections import Counter

import pytest
import yaml

from tests.e2e.conftest import spawn_workqueue, workqueue
from tests.support.marks import (
    busiest_window,
    grouped_folder,
    marking_worker,
    most_at_once,
    read_marks,
)
from tests.support.servers import wait_until


class Worker:  # what `cluster.args` reads of a worker
    def __init__(self, path) -> None:
        self.path = path


@pytest.mark.parametrize("batch", [[], ["--batch-size", "4"]], ids=["per-item", "batches"])
def test_a_group_limit_and_a_rate_hold_on_kubernetes(tmp_path, ambassador_server, cluster,
                                                     batch):  # fmt: skip
    counts = {"api": 6, "db": 4}
    source = grouped_folder(tmp_path / "in", counts, ".mp4")
    server = ambassador_server(source, "--recursive")
    worker, marks = marking_worker(tmp_path, 0.4)
    done = workqueue(*cluster.args(
        server.url, Worker(worker), "--once", "--parallelism", "5",
        "--group", "^([^/]+)/", "--limit", "api=2", "--rate", "db=2/1s", *batch,
    ), timeout=180)  # fmt: skip
    assert done.returncode == 0, done.stderr
    found = read_marks(marks)
    assert Counter(n for e, _, n in found if e == "end") == Counter(
        f"{g}/{i:02d}.mp4" for g, n in counts.items() for i in range(n)
    )
    most = most_at_once(found, lambda name: name.split("/")[0])
    assert most["api"] == 2, most
    db = [at for e, at, n in found if e == "start" and n.startswith("db/")]
    assert busiest_window(db, 1.0 - 0.3) <= 2  # (0.3 s: a worker's start-up, as locally)
    assert db[-1] - db[0] >= 1.0 - 0.3  # four starts at two a second: a period at least


def test_fair_share_on_kubernetes_lets_the_small_tenant_past_the_backlog(
    tmp_path, ambassador_server, cluster
):
    source = grouped_folder(tmp_path / "in", {"big": 6, "small": 2}, ".mp4")
    server = ambassador_server(source, "--recursive")
    worker, marks = marking_worker(tmp_path, 0.05)
    done = workqueue(*cluster.args(
        server.url, Worker(worker), "--once", "--parallelism", "1", "--group", "^([^/]+)/",
        "--fair",
    ), timeout=180)  # fmt: skip
    assert done.returncode == 0, done.stderr
    order = [n.split("/")[0] for e, _, n in read_marks(marks) if e == "start"]
    assert len(order) == 8 and order[:4].count("small") == 2, order


def test_scale_sets_the_group_rules_of_a_kubernetes_queue(cluster):
    first = workqueue("scale", *cluster.queue_args(), "--limit", "api=2", "--rate", "x=5/1m")
    assert first.returncode == 0, first.stderr
    assert "group limits api=2 (none asked before); group rates x=5/1m (none asked before)" \
        in first.stdout  # fmt: skip
    again = workqueue("scale", *cluster.queue_args(), "--no-limits")
    assert again.returncode == 0, again.stderr
    assert "group limits none (was api=2)" in again.stdout


def test_a_workqueue_spec_limit_holds_a_group_until_patched(tmp_path, ambassador_server, cluster):
    """The WorkQueue's spec.limits (as `kubectl patch` writes it) replace the manager's --limit
    while it runs: a group held at 0 starts nothing; patched to 2, it runs two at a time."""
    from kubernetes import client

    from tests.manager.backends.kubernetes.test_workqueue_resource import CRD, NS, G, P, V, stop

    cluster.server.store.install_crd(yaml.safe_load(CRD.read_text()))
    source = grouped_folder(tmp_path / "in", {"api": 5, "web": 2}, ".mp4")
    server = ambassador_server(source, "--recursive")
    worker, marks = marking_worker(tmp_path, 0.3)
    manager = spawn_workqueue(*cluster.args(
        server.url, Worker(worker), "--parallelism", "4", "--poll-interval", "0.2",
        "--group", "^([^/]+)/", "--limit", "api=0", "--grace", "1",
    ))  # fmt: skip
    api_client = client.ApiClient(cluster.server.client_configuration())
    try:
        ended = lambda group: [n for e, _, n in read_marks(marks)  # noqa: E731
                               if e == "end" and n.startswith(group)]  # fmt: skip
        wait_until(lambda: len(ended("web/")) == 2, timeout=60)
        assert not [n for _, _, n in read_marks(marks) if n.startswith("api/")]  # held at 0
        shown = workqueue("status", *cluster.queue_args(), "--source", server.url, "--json")
        assert json.loads(shown.stdout)["groups"]["api"]["held"] == \
            "group api is held (its limit is 0)"  # fmt: skip
        client.CustomObjectsApi(api_client).patch_namespaced_custom_object(
            G, V, NS, P, "thumbs", {"spec": {"limits": ["api=2"]}}
        )
        wait_until(lambda: len(ended("api/")) == 5, timeout=120)
    finally:
        stop(manager)
        api_client.close()
    assert most_at_once(read_marks(marks), lambda n: n.split("/")[0])["api"] == 2
