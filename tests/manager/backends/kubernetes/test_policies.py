"""What the Jobs ask of the cluster, honoured by the stand-in's Job controller (the test
kubelet): Kueue's suspended Jobs wait for admission; a disrupted pod does not use up an attempt;
Job labels and annotations from the command line."""

from __future__ import annotations

import json

from tests.e2e.conftest import spawn_workqueue, workqueue
from tests.support.folders import make_items
from tests.support.servers import free_port, holding, wait_until


def test_kueue_jobs_wait_suspended_until_admitted(
    tmp_path, ambassador_server, marker_worker, cluster
):
    make_items(tmp_path / "videos", ["a.mp4"])
    server = ambassador_server(tmp_path / "videos")
    extra = ["--once", "--kueue-queue", "media-queue", "--job-label", "team=media"]
    extra += ["--job-annotation", "example.com/owner=video-team"]
    run = spawn_workqueue(*cluster.args(server.url, marker_worker, *extra))
    try:
        job = wait_until(lambda: next(iter(cluster.objects("jobs")), None), timeout=30)
        meta = job["metadata"]
        assert meta["labels"]["kueue.x-k8s.io/queue-name"] == "media-queue"
        assert meta["labels"]["team"] == "media"
        assert meta["labels"]["workqueue.dev/queue"] == "thumbs"  # ours are kept
        assert meta["annotations"]["example.com/owner"] == "video-team"
        assert job["spec"]["suspend"] is True
        wait_until(lambda: _reason(cluster, "a.mp4").startswith("waiting for admission"))
        assert cluster.kubelet.runs == []  # nothing runs before admission
        # Kueue admits the workload: it unsuspends the Job
        cluster.server.store.patch(
            "jobs", "media", meta["name"], {"spec": {"suspend": False}}, "application/merge-patch"
        )
        out, err = run.communicate(timeout=60)
        assert run.returncode == 0, err
    finally:
        if run.poll() is None:
            run.kill()
    assert [code for _, code in cluster.kubelet.runs] == [0]


def test_a_disrupted_pod_does_not_use_up_an_attempt(
    tmp_path, ambassador_server, marker_worker, cluster
):
    make_items(tmp_path / "videos", ["a.mp4"])
    server = ambassador_server(tmp_path / "videos")
    cluster.kubelet.disrupt = {"a.mp4": 1}  # preempted once, then it runs
    r = workqueue(*cluster.args(server.url, marker_worker, "--once", "--backoff-limit", "0"))
    assert r.returncode == 0, r.stderr
    [(pod, ignored)] = cluster.kubelet.disruptions
    assert ignored  # the Job's podFailurePolicy ignored the DisruptionTarget failure
    [job] = cluster.objects("jobs")
    assert job["spec"]["podReplacementPolicy"] == "Failed"
    assert job["metadata"]["annotations"]["workqueue.dev/attempt"] == "1"


def _reason(cluster, name: str) -> str:
    r = workqueue("status", *cluster.queue_args(), "--json")
    if r.returncode != 0:
        return ""
    items = {i["name"]: i for i in json.loads(r.stdout)["items"]}
    return items.get(name, {}).get("reason", "")


def test_a_pod_that_cannot_start_fails_its_item_and_frees_the_slot(
    tmp_path, ambassador_server, marker_worker, cluster
):
    """parallelism 1: the item whose image cannot be pulled would hold the only slot forever;
    after --stuck-timeout it fails (recorded, an Event, its Job deleted) and the next runs. A
    pod waiting for a node is not failed."""
    cluster.kubelet.stuck = {"pull-me": "ImagePullBackOff", "huge": "Unschedulable"}
    make_items(tmp_path / "videos", ["a-pull-me.mp4", "b-ok.mp4"])
    server = ambassador_server(tmp_path / "videos")
    extra = ["--once", "--parallelism", "1", "--max-attempts", "1", "--stuck-timeout", "1s"]
    r = workqueue(*cluster.args(server.url, marker_worker, *extra))
    assert r.returncode == 1, r.stderr  # the stuck item failed; the other succeeded
    assert "a-pull-me.mp4 (stuck: ImagePullBackOff for" in r.stdout, r.stdout
    assert "1 succeeded, 1 failed" in r.stdout
    jobs = {j["metadata"]["annotations"]["workqueue.dev/item"] for j in cluster.objects("jobs")}
    assert "a-pull-me.mp4" not in jobs  # deleted: the slot is free
    events = [e for e in cluster.objects("events") if e.get("reason") == "Stuck"]
    assert len(events) == 1 and events[0]["type"] == "Warning"
    assert "ImagePullBackOff" in events[0]["message"]
    r2 = workqueue("status", *cluster.queue_args(), "--json")
    assert r2.returncode == 0, r2.stderr
    status = json.loads(r2.stdout)
    assert status["counts"]["failed"] == 1 and status["counts"]["succeeded"] == 1


def test_a_pod_waiting_for_a_node_is_left_waiting(
    tmp_path, ambassador_server, marker_worker, cluster
):
    cluster.kubelet.stuck = {"huge": "Unschedulable"}
    make_items(tmp_path / "videos", ["huge.mp4"])
    server = ambassador_server(tmp_path / "videos")
    args = cluster.args(server.url, marker_worker, "--stuck-timeout", "1s", "--grace", "1")
    manager = spawn_workqueue(*args, "--poll-interval", "0.2")
    try:
        wait_until(lambda: _reason(cluster, "huge.mp4").startswith("waiting for a node"),
                   timeout=60)  # fmt: skip
        import time

        time.sleep(2.5)  # well past --stuck-timeout
        assert len(cluster.objects("jobs")) == 1
        assert _reason(cluster, "huge.mp4").startswith("waiting for a node")
    finally:
        manager.terminate()
        manager.wait(timeout=60)


def test_stuck_pods_are_counted_by_reason_on_metrics(
    tmp_path, ambassador_server, marker_worker, cluster
):
    import requests

    from tests.support.servers import free_port

    cluster.kubelet.stuck = {"pull": "ImagePullBackOff", "huge": "Unschedulable"}
    make_items(tmp_path / "videos", ["huge.mp4", "pull.mp4"])
    server = ambassador_server(tmp_path / "videos")
    port = free_port()
    args = cluster.args(server.url, marker_worker, "--stuck-timeout", "1h", "--grace", "1")
    manager = spawn_workqueue(*args, "--metrics-port", port, "--poll-interval", "0.2")

    def stuck_line():
        try:
            text = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=2).text
        except requests.RequestException:
            return None
        lines = [x for x in text.splitlines() if x.startswith("workqueue_items_stuck{")]
        return lines or None

    try:
        assert wait_until(stuck_line, timeout=30) == [
            'workqueue_items_stuck{reason="ImagePullBackOff"} 1.0'
        ]  # the pod waiting for a node is not stuck
    finally:
        manager.terminate()
        manager.wait(timeout=60)


def test_a_storm_of_500s_on_completion_writes_loses_nothing(
    tmp_path, ambassador_server, marker_worker, cluster
):
    """Runs of 500s longer than the API client's own retries, on the record writes and on the
    finalizer patch: the completion controller puts the Job back with backoff, so every item
    ends recorded, every finalizer removed, and the --once run exits."""
    names = ["a.mp4", "b.mp4"]
    make_items(tmp_path / "videos", names)
    server = ambassador_server(tmp_path / "videos")
    faults = cluster.server.faults
    faults.add("500", verb="update", resource="configmaps", count=7)
    faults.add("500", verb="patch", resource="jobs", count=7)
    r = workqueue(*cluster.args(server.url, marker_worker, "--once"), timeout=110)
    assert r.returncode == 0, r.stderr
    assert "2 items: 2 succeeded" in r.stdout
    assert "could not settle" in r.stderr  # it did fail, and was retried
    for job in cluster.objects("jobs"):
        assert "workqueue.dev/record" not in (job["metadata"].get("finalizers") or [])
    records = [c for c in cluster.objects("configmaps") if "-record-" in c["metadata"]["name"]]
    assert sum(len(c.get("data") or {}) for c in records) == 2


def test_a_fail_fast_exit_code_fails_the_item_at_once_and_for_good(
    tmp_path, ambassador_server, marker_worker, cluster
):
    """The marker worker exits 7 on items named "fail": listed as final, the Job fails at the
    first pod (backoffLimit 3 notwithstanding) and the manager does not retry (max-attempts 3),
    now or on a later pass."""
    make_items(tmp_path / "videos", ["will-fail.mp4", "ok.mp4"])
    server = ambassador_server(tmp_path / "videos")
    extra = ["--once", "--backoff-limit", "3", "--max-attempts", "3", "--retry-backoff", "50ms"]
    args = cluster.args(server.url, marker_worker, *extra, "--fail-fast-exit-codes", "7,9")
    r = workqueue(*args)
    assert r.returncode == 1, r.stderr
    assert "will-fail.mp4 (exit code 7 listed in --fail-fast-exit-codes" in r.stdout, r.stdout
    assert "failed for good, 1 attempt(s))" in r.stdout
    failing = [code for job, code in cluster.kubelet.runs if "will-fail" in job]
    assert failing == [7]  # one pod, one attempt
    [job] = [j for j in cluster.objects("jobs") if "will-fail" in j["metadata"]["name"]]
    rules = job["spec"]["podFailurePolicy"]["rules"]
    assert rules[-1]["action"] == "FailJob" and rules[-1]["onExitCodes"]["values"] == [7, 9]
    again = workqueue(*args)
    assert "1 already done, 1 failed" in again.stdout, again.stdout  # still failed, not rerun
    assert len(cluster.kubelet.runs) == 2  # nothing ran again


def test_a_paused_queue_dispatches_nothing_across_a_restart_until_resumed(
    tmp_path, ambassador_server, marker_worker, cluster
):
    make_items(tmp_path / "videos", ["a.mp4", "b.mp4"])
    server = ambassador_server(tmp_path / "videos")
    r = workqueue("pause", *cluster.queue_args())
    assert r.returncode == 0 and "paused" in r.stdout, r.stderr
    args = cluster.args(server.url, marker_worker, "--once", "--leader-elect", "--grace", "1")
    args += ["--lease-duration", "2", "--renew-deadline", "1.5", "--retry-period", "0.1"]
    port = free_port()
    first = spawn_workqueue(*args, "--metrics-port", port)
    try:
        wait_until(lambda: "paused since" in _status_text(cluster), timeout=30)
        # the leader's own word: both items in its line, the queue held - so no Job below is
        # the pause, not a manager that has not begun
        wait_until(lambda: holding(port, 2), timeout=30)
        assert cluster.objects("jobs") == []  # held
    finally:
        first.terminate()
        first.wait(timeout=60)
    port = free_port()
    second = spawn_workqueue(*args, "--metrics-port", port)  # a restarted leader obeys it too
    try:
        wait_until(lambda: holding(port, 2), timeout=30)
        assert cluster.objects("jobs") == []
        r = workqueue("resume", *cluster.queue_args())
        assert r.returncode == 0 and "resumed" in r.stdout
        out, err = second.communicate(timeout=60)
        assert second.returncode == 0, err
        assert err.count("queue paused since") == 1 and "queue resumed" in err
    finally:
        if second.poll() is None:
            second.kill()
    assert sorted(code for _, code in cluster.kubelet.runs) == [0, 0]


def _status_text(cluster) -> str:
    return workqueue("status", *cluster.queue_args()).stdout
