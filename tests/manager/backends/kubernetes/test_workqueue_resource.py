"""A running manager on the stand-in follows its WorkQueue: spec.parallelism up and down (0
included) and spec.paused take effect without a restart, through a watch; `workqueue scale`
and a `/scale` update (what kubectl scale, an HPA or KEDA sends) both land; the status is
reported; the built-in autoscaler writes spec.parallelism and `workqueue scale` then refuses;
without the CRD the control ConfigMap does the same."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import yaml
from kubernetes import client

from tests.e2e.conftest import spawn_workqueue, workqueue
from tests.support.folders import make_items
from tests.support.servers import wait_until

NS = "media"
CRD = Path(__file__).resolve().parents[4] / "charts/workqueue/crds/workqueues.workqueue.dev.yaml"
G, V, P = "workqueue.dev", "v1alpha1", "workqueues"


def running_jobs(cluster) -> int:
    return sum(
        1
        for job in cluster.objects("jobs")
        if not any(
            c.get("status") == "True" for c in (job.get("status") or {}).get("conditions") or []
        )
    )


def workqueue_object(cluster) -> dict | None:
    return cluster.server.store.objects.get((P, NS, "thumbs"))


def spec_of(cluster) -> dict:
    return (workqueue_object(cluster) or {}).get("spec") or {}


def condition(cluster, kind: str, status: str) -> dict | None:
    conditions = ((workqueue_object(cluster) or {}).get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == kind and c["status"] == status), None)


def stop(manager) -> None:
    if manager.poll() is None:
        manager.send_signal(signal.SIGTERM)
    manager.communicate(timeout=60)


def test_the_manager_follows_its_workqueue(tmp_path, ambassador_server, marker_worker, cluster,
                                          monkeypatch):  # fmt: skip
    cluster.server.store.install_crd(yaml.safe_load(CRD.read_text()))
    monkeypatch.setenv("SLEEP", "2")  # the kubelet runs pods in this process's environment
    make_items(tmp_path / "videos", [f"v{i:02d}.mp4" for i in range(12)])
    server = ambassador_server(tmp_path / "videos")
    args = cluster.args(server.url, marker_worker, "--parallelism", "1", "--poll-interval", "0.2",
                        "--grace", "1")  # fmt: skip
    manager = spawn_workqueue(*args)
    api_client = client.ApiClient(cluster.server.client_configuration())
    custom = client.CustomObjectsApi(api_client)
    try:
        made = wait_until(lambda: workqueue_object(cluster), timeout=30)
        # seeded by --parallelism
        assert made["spec"] == {"parallelism": 1, "paused": False, "deletionPolicy": "Retain"}
        wait_until(lambda: running_jobs(cluster) == 1, timeout=30)

        said = workqueue("scale", "--parallelism", "3", *cluster.queue_args())
        assert said.returncode == 0, said.stderr
        assert "parallelism 3 (was 1): up to 3 at once" in said.stdout
        wait_until(lambda: running_jobs(cluster) == 3, timeout=30)
        status = wait_until(
            lambda: (workqueue_object(cluster).get("status") or {}).get("replicas") == 3
            and workqueue_object(cluster)["status"], timeout=30,
        )  # fmt: skip
        assert status["selector"] == "workqueue.dev/queue=thumbs"
        assert status["scaledBy"] == "external" and status["counts"]["running"] >= 1
        assert {c["type"] for c in status["conditions"]} == {
            "Ready", "Progressing", "Degraded",
            "Paused", "Stuck", "StorageFault", "SourceUnavailable"}  # fmt: skip
        said = {c["type"]: c for c in status["conditions"]}
        assert said["Ready"]["status"] == "True" and said["Degraded"]["status"] == "False"
        assert said["Progressing"]["status"] == "True"  # an item runs

        custom.patch_namespaced_custom_object_scale(
            G, V, NS, P, "thumbs", {"spec": {"replicas": 0}}
        )
        wait_until(lambda: running_jobs(cluster) == 0, timeout=60)  # what ran finished ...
        done = len(cluster.objects("jobs"))
        scale = custom.get_namespaced_custom_object_scale(G, V, NS, P, "thumbs")
        wait_until(lambda: custom.get_namespaced_custom_object_scale(
            G, V, NS, P, "thumbs")["status"]["replicas"] == 0, timeout=30)  # fmt: skip
        assert scale["spec"]["replicas"] == 0
        time.sleep(2)
        assert len(cluster.objects("jobs")) == done  # ... and nothing new started

        custom.patch_namespaced_custom_object(
            G, V, NS, P, "thumbs", {"spec": {"paused": True, "parallelism": 2}}
        )
        paused = wait_until(lambda: condition(cluster, "Paused", "True"), timeout=30)
        assert paused["reason"] == "Paused"
        time.sleep(1.5)
        assert len(cluster.objects("jobs")) == done  # paused: still nothing new
        said = workqueue("resume", *cluster.queue_args())  # through the WorkQueue, with the CRD
        assert said.returncode == 0 and "resumed" in said.stdout, said.stderr
        assert spec_of(cluster)["paused"] is False
        wait_until(lambda: len(cluster.objects("jobs")) > done, timeout=30)
        assert running_jobs(cluster) <= 2
    finally:
        stop(manager)
        api_client.close()


def test_the_builtin_autoscaler_writes_the_spec_and_scale_refuses(
    tmp_path, ambassador_server, marker_worker, cluster, monkeypatch
):
    cluster.server.store.install_crd(yaml.safe_load(CRD.read_text()))
    monkeypatch.setenv("SLEEP", "1")
    make_items(tmp_path / "videos", [f"v{i:02d}.mp4" for i in range(10)])
    server = ambassador_server(tmp_path / "videos")
    args = cluster.args(server.url, marker_worker, "--parallelism", "1", "--poll-interval", "0.2",
                        "--autoscale", "--min-parallelism", "1", "--max-parallelism", "4",
                        "--scale-interval", "0.5", "--grace", "1")  # fmt: skip
    manager = spawn_workqueue(*args)
    try:
        wait_until(lambda: spec_of(cluster).get("parallelism") == 4, timeout=60)
        status = wait_until(lambda: (workqueue_object(cluster) or {}).get("status"), timeout=30)
        assert status["scaledBy"] == "builtin"
        seen = cluster.server.verbs_seen()  # the calls tests/charts' RBAC check counts on
        assert ("patch", "workqueue.dev/workqueues", "scale") in seen
        assert ("create", "workqueue.dev/workqueues", "") in seen
        refused = workqueue("scale", "--parallelism", "2", *cluster.queue_args())
        assert refused.returncode == 2
        assert "runs with --autoscale" in refused.stderr and "Traceback" not in refused.stderr
    finally:
        stop(manager)


def test_without_the_crd_scale_and_pause_go_through_the_control_configmap(
    tmp_path, ambassador_server, marker_worker, cluster, monkeypatch
):
    monkeypatch.setenv("SLEEP", "2")
    make_items(tmp_path / "videos", [f"v{i:02d}.mp4" for i in range(8)])
    server = ambassador_server(tmp_path / "videos")
    args = cluster.args(server.url, marker_worker, "--parallelism", "1", "--poll-interval", "0.2",
                        "--grace", "1")  # fmt: skip
    manager = spawn_workqueue(*args)
    try:
        wait_until(lambda: running_jobs(cluster) == 1, timeout=30)
        said = workqueue("scale", "--parallelism", "2", *cluster.queue_args())
        assert said.returncode == 0 and "none asked before" in said.stdout, said.stderr
        wait_until(lambda: running_jobs(cluster) == 2, timeout=30)
        assert workqueue("pause", *cluster.queue_args()).returncode == 0
        assert workqueue("resume", *cluster.queue_args()).returncode == 0
        assert ("watch", "configmaps", "") in cluster.server.verbs_seen()
        control = cluster.server.store.objects[("configmaps", NS, "thumbs-control")]
        assert control["data"] == {"parallelism": "2"}  # resume left the asked parallelism
    finally:
        stop(manager)


def test_pods_that_cannot_start_make_the_workqueue_stuck(
    tmp_path, ambassador_server, marker_worker, cluster
):
    cluster.server.store.install_crd(yaml.safe_load(CRD.read_text()))
    cluster.kubelet.stuck = {"pull-me": "ImagePullBackOff"}
    make_items(tmp_path / "videos", ["pull-me.mp4"])
    server = ambassador_server(tmp_path / "videos")
    manager = spawn_workqueue(*cluster.args(server.url, marker_worker, "--poll-interval", "0.2"))
    try:
        stuck = wait_until(lambda: condition(cluster, "Stuck", "True"), timeout=60)
        assert stuck["reason"] == "PodsCannotStart" and "1 ImagePullBackOff" in stuck["message"]
        assert condition(cluster, "Paused", "False") is not None
    finally:
        stop(manager)


def test_a_manager_that_may_not_read_workqueues_falls_back_to_the_configmap(
    tmp_path, ambassador_server, marker_worker, cluster
):
    """An older Role (no workqueue rules) where the CRD is installed: one warning, and pause
    and scale work through the control ConfigMap."""
    cluster.server.store.install_crd(yaml.safe_load(CRD.read_text()))
    cluster.server.faults.add("foreign", verb="list", resource=P, code=403, reason="Forbidden")
    make_items(tmp_path / "videos", ["a.mp4"])
    server = ambassador_server(tmp_path / "videos")
    manager = spawn_workqueue(*cluster.args(server.url, marker_worker, "--once"))
    out, err = manager.communicate(timeout=60)
    assert manager.returncode == 0, err
    assert "may not read workqueues (Forbidden)" in err and "Traceback" not in err
    assert workqueue_object(cluster) is None  # nothing was made where it may not read


def test_a_status_that_answers_a_change_of_spec_is_written_at_once(apiserver, tmp_path):
    from kube_workqueue.manager.backends.kubernetes.client.api import KubeApi, load_configuration
    from kube_workqueue.manager.backends.kubernetes.steering.queue_resource import QueueResource

    apiserver.store.install_crd(yaml.safe_load(CRD.read_text()))
    api = KubeApi(NS, load_configuration(apiserver.write_kubeconfig(tmp_path / "kc")), qps=0)
    resource = QueueResource(api, "thumbs", 2).start()
    facts = {"parallelism": 2, "counts": {"pending": 3}}

    def writes() -> int:
        return sum(
            1 for call in list(apiserver.requests) if call[0] == "patch" and call[3] == "status"
        )

    def status() -> dict:
        return apiserver.store.get("workqueues", NS, "thumbs").get("status") or {}

    try:
        resource.report(facts)
        assert status()["counts"]["pending"] == 3 and writes() == 1
        resource.report({**facts, "counts": {"pending": 2}})  # news, but no answer: it waits
        assert writes() == 1 and status()["counts"]["pending"] == 3
        resource.report({**facts, "parallelism": 5, "counts": {"pending": 2}})  # an answer
        assert writes() == 2 and status()["replicas"] == 5
        resource.report({**facts, "parallelism": 5, "paused_since": 1.0})  # Paused: an answer
        assert writes() == 3
        assert [c["status"] for c in status()["conditions"] if c["type"] == "Paused"] == ["True"]
        resource.report({**facts, "parallelism": 5, "paused_since": 1.0, "counts": {}})
        assert writes() == 3  # within MIN_WRITE_SECONDS and answering nothing new
    finally:
        resource.stop()


def test_a_field_that_no_longer_applies_leaves_the_status(apiserver, tmp_path):
    """A merge patch that leaves a field out keeps it (RFC 7386): after a queue drained, its
    status said `oldestWaitingSeconds: 93.8` for good. Fields that no longer apply are sent as
    null, nested ones too."""
    from kube_workqueue.manager.backends.kubernetes.client.api import KubeApi, load_configuration
    from kube_workqueue.manager.backends.kubernetes.steering.queue_resource import (
        QueueResource,
        clearing,
    )

    assert clearing({"a": 1, "f": {"x": 1}}, {"a": 2, "b": 3, "f": {"x": 0, "y": 4}}) == {
        "a": 1, "b": None, "f": {"x": 1, "y": None}}  # fmt: skip
    apiserver.store.install_crd(yaml.safe_load(CRD.read_text()))
    api = KubeApi(NS, load_configuration(apiserver.write_kubeconfig(tmp_path / "kc")), qps=0)
    resource = QueueResource(api, "thumbs", 2).start()
    waiting = {"parallelism": 2, "counts": {"pending": 40}, "oldest_waiting_seconds": 93.8,
               "service_seconds": 2.0, "verdict": "stable", "drain_seconds": 40.0}  # fmt: skip
    try:
        resource.report(waiting)
        status = apiserver.store.get("workqueues", NS, "thumbs")["status"]
        assert status["oldestWaitingSeconds"] == 93.8 and status["forecast"]["drainSeconds"] == 40
        resource.report({"parallelism": 3, "counts": {"succeeded": 40}})  # drained (an answer)
        status = apiserver.store.get("workqueues", NS, "thumbs")["status"]
        assert "oldestWaitingSeconds" not in status and "serviceSeconds" not in status
        assert "forecast" not in status and status["counts"]["succeeded"] == 40
    finally:
        resource.stop()
