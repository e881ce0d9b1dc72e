"""Everything the manager creates for a queue is owned - by the queue's WorkQueue, itself owned by
the manager's Deployment (or, without the CRD, by that Deployment) - and labelled as Helm's
conventions say, so deleting the queue (or `helm uninstall`, which deletes the Deployment)
cleans up through the garbage collector; on the stand-in, which collects garbage as
https://kubernetes.io/docs/concepts/architecture/garbage-collection/ says (background
propagation; a dependent goes once none of its owners is left)."""

from __future__ import annotations

import yaml

from tests.e2e.conftest import workqueue
from tests.support.folders import make_items

from .test_workqueue_resource import CRD, NS, P

STANDARD = {
    "app.kubernetes.io/name": "workqueue",
    "app.kubernetes.io/instance": "demo",
    "app.kubernetes.io/component": "worker",
    "app.kubernetes.io/part-of": "workqueue",
    "app.kubernetes.io/managed-by": "workqueue",
}


def owned(cluster, kind: str) -> dict[str, list[str]]:
    """name -> the kinds of its owners, for every object of `kind` in the namespace."""
    return {
        o["metadata"]["name"]: [r["kind"] for r in o["metadata"].get("ownerReferences") or []]
        for o in cluster.objects(kind)
    }


def run(tmp_path, ambassador_server, marker_worker, cluster, *extra):
    make_items(tmp_path / "videos", ["a.mp4", "b.mp4"])
    server = ambassador_server(tmp_path / "videos")
    cluster.server.store.create("apps", "deployments", NS, {"metadata": {"name": "demo-wq"}})
    owner = ("--owner-deployment", "demo-wq", "--instance", "demo")
    r = workqueue(*cluster.args(server.url, marker_worker, "--once", *owner, "--leader-elect",
                                *extra))  # fmt: skip
    assert r.returncode == 0, r.stderr


def test_deleting_the_deployment_removes_the_queue_and_all_it_made(
    tmp_path, ambassador_server, marker_worker, cluster
):
    cluster.server.store.install_crd(yaml.safe_load(CRD.read_text()))
    run(tmp_path, ambassador_server, marker_worker, cluster)
    queue = cluster.server.store.objects[(P, NS, "thumbs")]
    assert [r["kind"] for r in queue["metadata"]["ownerReferences"]] == ["Deployment"]
    jobs = owned(cluster, "jobs")
    assert len(jobs) == 2 and set(map(tuple, jobs.values())) == {("WorkQueue",)}
    maps = owned(cluster, "configmaps")
    assert all(kinds in (["WorkQueue"], ["Job"]) for kinds in maps.values()), maps
    assert any("-record-" in name for name in maps)  # the record is the queue's too
    assert set(map(tuple, owned(cluster, "leases").values())) == {("WorkQueue",)}
    for job in cluster.objects("jobs"):
        assert STANDARD.items() <= job["metadata"]["labels"].items()
        assert STANDARD.items() <= job["spec"]["template"]["metadata"]["labels"].items()
    for pod in cluster.objects("pods"):
        assert STANDARD.items() <= pod["metadata"]["labels"].items()

    cluster.server.store.delete("deployments", NS, "demo-wq", {})  # what helm uninstall does
    assert cluster.server.store.objects.get((P, NS, "thumbs")) is None
    for kind in ("jobs", "configmaps", "leases", "pods"):
        assert cluster.objects(kind) == [], kind


def test_without_the_crd_the_deployment_owns_what_the_manager_makes(
    tmp_path, ambassador_server, marker_worker, cluster
):
    run(tmp_path, ambassador_server, marker_worker, cluster)
    assert set(map(tuple, owned(cluster, "jobs").values())) == {("Deployment",)}
    cluster.server.store.delete("deployments", NS, "demo-wq", {})
    for kind in ("jobs", "configmaps", "leases"):
        assert cluster.objects(kind) == [], kind
