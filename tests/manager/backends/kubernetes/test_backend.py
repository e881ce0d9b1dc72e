"""The Kubernetes backend end to end: a real ambassador, the manager as a real process talking
to the API-server stand-in through the official client, and the test kubelet running each Job's
pod as local processes. Every object the manager created is validated against the official
schemas."""

from __future__ import annotations

from collections import Counter

import kubernetes_validate

from kube_workqueue.manager.backends.kubernetes.manifests import objects as ko
from tests.e2e.conftest import spawn_workqueue, workqueue
from tests.manager.backends.kubernetes.test_rivals import created_jobs
from tests.support.folders import make_items
from tests.support.kube_schemas import validate as validate_strictly

NS = "media"
VERSIONS = ["1.30.0", kubernetes_validate.latest_version()]


def validate_all(cluster):
    for resource in ("jobs", "configmaps", "events", "leases"):
        for obj in cluster.objects(resource):
            for version in VERSIONS:
                validate_strictly(obj, version, strict=True)


def test_every_item_runs_once_as_a_job_and_is_recorded(
    tmp_path, ambassador_server, marker_worker, cluster
):
    names = [f"clip-{i}.mp4" for i in range(6)] + ["it's $(odd) ünï.mp4"]
    make_items(tmp_path / "videos", names)
    server = ambassador_server(tmp_path / "videos")
    r = workqueue(*cluster.args(server.url, marker_worker, "--once", "--parallelism", "3"))
    assert r.returncode == 0, r.stderr
    assert f"{len(names)} items: {len(names)} succeeded" in r.stdout
    assert Counter(marker_worker.ended()) == Counter(names)
    jobs = {j["metadata"]["annotations"][ko.ITEM_ANNOTATION]: j for j in cluster.objects("jobs")}
    assert set(jobs) == set(names)
    for item, job in jobs.items():
        version = job["metadata"]["annotations"][ko.VERSION_ANNOTATION]
        assert job["metadata"]["name"] == ko.object_name("thumbs", item, version)
        assert ko.RECORD_FINALIZER not in (job["metadata"].get("finalizers") or [])
    owned = [c for c in cluster.objects("configmaps") if c["metadata"].get("ownerReferences")]
    assert len(owned) == len(names)
    records = [c for c in cluster.objects("configmaps") if "-record-" in c["metadata"]["name"]]
    assert sum(len(c["data"]) for c in records) == len(names)
    assert cluster.objects("events") == []  # Events are for failures, a person acts on them
    validate_all(cluster)
    # a second pass runs nothing
    r = workqueue(*cluster.args(server.url, marker_worker, "--once"))
    assert r.returncode == 0 and f"{len(names)} already done" in r.stdout
    assert len(marker_worker.started()) == len(names)


def test_ttl_deletion_of_finished_jobs_reruns_nothing(
    tmp_path, ambassador_server, marker_worker, cluster
):
    make_items(tmp_path / "videos", ["a.mp4", "b.mp4"])
    server = ambassador_server(tmp_path / "videos")
    r = workqueue(*cluster.args(server.url, marker_worker, "--once", "--ttl-after-finished", "0"))
    assert r.returncode == 0, r.stderr
    from tests.support.servers import wait_until

    wait_until(lambda: not cluster.objects("jobs"))
    assert not [c for c in cluster.objects("configmaps") if c["metadata"].get("ownerReferences")]
    r = workqueue(*cluster.args(server.url, marker_worker, "--once"))
    assert r.returncode == 0 and "2 already done" in r.stdout
    assert sorted(marker_worker.started()) == ["a.mp4", "b.mp4"]


def test_a_failing_item_is_retried_then_stays_failed_until_retry(
    tmp_path,
    ambassador_server,
    marker_worker,
    cluster,
):
    make_items(tmp_path / "videos", ["ok.mp4", "will-fail.mp4"])
    server = ambassador_server(tmp_path / "videos")
    r = workqueue(
        *cluster.args(
            server.url, marker_worker, "--once", "--max-attempts", "2", "--retry-backoff", "0.05"
        )
    )
    assert r.returncode == 1
    assert "1 succeeded, 1 failed" in r.stdout
    assert Counter(marker_worker.started())["will-fail.mp4"] == 2
    failed_job = [
        j
        for j in cluster.objects("jobs")
        if j["metadata"]["annotations"][ko.ITEM_ANNOTATION] == "will-fail.mp4"
    ][0]
    assert failed_job["metadata"]["annotations"][ko.ATTEMPT_ANNOTATION] == "2"
    validate_all(cluster)


def test_crash_leftovers_do_not_block_an_item(
    tmp_path,
    ambassador_server,
    marker_worker,
    cluster,
):
    import requests

    make_items(tmp_path / "videos", ["a.mp4"])
    server = ambassador_server(tmp_path / "videos")
    version = requests.get(server.url + "/api/v1/items/a.mp4", timeout=5).json()["data"]["version"]
    # a ConfigMap without its Job: what a crash between the two creates leaves
    stale = {"name": "stale", "version": version}
    cluster.server.store.create("", "configmaps", NS, ko.config_map("thumbs", NS, "a.mp4", stale))
    r = workqueue(*cluster.args(server.url, marker_worker, "--once"))
    assert r.returncode == 0, r.stderr
    assert marker_worker.ended() == ["a.mp4"]
    assert [e["data"]["name"] for e in marker_worker.events()] == ["a.mp4", "a.mp4"]  # not stale
    cm = [
        c
        for c in cluster.objects("configmaps")
        if c["metadata"]["name"] == ko.object_name("thumbs", "a.mp4", version)
    ][0]
    assert cm["metadata"]["ownerReferences"][0]["kind"] == "Job"


def test_user_mistakes_are_one_line(tmp_path, cluster, marker_worker):
    base = cluster.args("http://127.0.0.1:1", marker_worker)
    for bad in (
        ["--queue", "Bad_Name"],
        ["--image", ""],
        ["--toleration", "x"],
        ["--kubeconfig", str(tmp_path / "missing")],
    ):
        args = list(base)
        flag = bad[0]
        if flag in args:
            i = args.index(flag)
            args[i : i + 2] = bad
        else:
            args += bad
        r = workqueue(*args)
        assert r.returncode == 2, (bad, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_api_faults_mid_run_lose_nothing(tmp_path, ambassador_server, marker_worker, cluster):
    names = [f"clip-{i}.mp4" for i in range(8)]
    make_items(tmp_path / "videos", names)
    server = ambassador_server(tmp_path / "videos")
    faults = cluster.server.faults
    faults.add("429", verb="create", resource="jobs", retry_after=1, count=2)
    faults.add("500", verb="create", resource="configmaps", count=2)
    faults.add("500", verb="get", resource="configmaps", count=2)
    faults.add("cut", verb="watch", resource="jobs", after_events=2, count=3)
    faults.add("delay", verb="update", resource="configmaps", delay=0.3, count=3)
    r = workqueue(*cluster.args(server.url, marker_worker, "--once", "--parallelism", "3"))
    assert r.returncode == 0, r.stderr
    assert Counter(marker_worker.started()) == Counter(names)
    assert created_jobs(cluster)[201] == len(names)
    validate_all(cluster)


def test_a_dropped_video_becomes_a_thumbnail_through_jobs(
    tmp_path, ambassador_server, sample_videos, ffmpeg_env, cluster
):
    from tests.e2e.conftest import THUMBNAIL, mean_brightness

    out = tmp_path / "thumbnails"
    cluster.kubelet.env.update(PATH=ffmpeg_env["PATH"])
    server = ambassador_server(sample_videos)
    args = cluster.args(
        server.url,
        type("W", (), {"path": THUMBNAIL}),
        "--once",
        "--env",
        f"OUTPUT_DIR={out}",
        "--max-attempts",
        "1",
    )
    r = workqueue(*args, env=ffmpeg_env, timeout=180)
    assert r.returncode == 1, r.stderr  # broken.mp4 fails alone
    assert "4 succeeded, 1 failed" in r.stdout and "failed: broken.mp4" in r.stdout
    for png in sorted(out.glob("*.png")):
        assert mean_brightness(png, ffmpeg_env) > 40
    assert len(list(out.glob("*.png"))) == 4


def test_retry_runs_a_failed_item_again(tmp_path, ambassador_server, marker_worker, cluster):
    make_items(tmp_path / "videos", ["will-fail.mp4", "ok-1.mp4"])
    server = ambassador_server(tmp_path / "videos")
    r = workqueue(*cluster.args(server.url, marker_worker, "--once", "--max-attempts", "1"))
    assert r.returncode == 1
    # status and retry answer from the cluster, as they do from the local ledger
    r = workqueue("status", *cluster.queue_args())
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(
        "2 items in namespace media, queue thumbs: 0 pending, 0 running, 1 succeeded, 1 failed"
    )
    assert "will-fail.mp4: failed with exit code 7 after 1 attempt" in r.stdout, r.stdout
    r = workqueue("retry", "never-seen.mp4", *cluster.queue_args())  # one line, exit 2
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        "workqueue retry: error: no item named 'never-seen.mp4' in queue thumbs of media"
    ]
    r = workqueue("retry", "ok-1.mp4", *cluster.queue_args())
    assert r.returncode == 2 and "is succeeded, not failed" in r.stderr
    r = workqueue("retry", "will-fail.mp4", *cluster.queue_args())
    assert r.returncode == 0, r.stderr
    assert "was failed" in r.stdout
    retried = [
        j for j in cluster.objects("jobs")
        if j["metadata"]["annotations"][ko.ITEM_ANNOTATION] == "will-fail.mp4"
    ]  # fmt: skip
    assert not retried  # its Job is gone: the next pass runs it again
    workqueue(*cluster.args(server.url, marker_worker, "--once", "--max-attempts", "1"))
    assert Counter(marker_worker.started())["will-fail.mp4"] == 2


def test_metrics_of_the_kubernetes_backend(tmp_path, ambassador_server, marker_worker, cluster):
    import signal

    import requests

    from tests.support.servers import free_port, wait_until

    make_items(tmp_path / "videos", ["ok-1.mp4", "ok-2.mp4", "will-fail.mp4"])
    server = ambassador_server(tmp_path / "videos")
    port = free_port()
    proc = spawn_workqueue(
        *cluster.args(
            server.url,
            marker_worker,
            "--metrics-port",
            str(port),
            "--max-attempts",
            "1",
            "--poll-interval",
            "0.5",
        )
    )
    samples: dict[str, float] = {}

    def scrape() -> bool:
        try:
            text = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=2).text
        except requests.RequestException:
            return False
        samples.clear()
        for line in text.splitlines():
            if line and not line.startswith("#"):
                key, value = line.rsplit(" ", 1)
                samples[key] = float(value)
        return (
            samples.get("workqueue_jobs_created_total") == 3
            and samples.get(
                'workqueue_job_completions_total{reason="BackoffLimitExceeded",result="failed"}'
            )
            == 1
            # The completion controller counts a Job when it records it; the runner
            # observes the item's duration when its wait returns, on another thread,
            # a moment later: wait for both.
            and samples.get('workqueue_item_duration_seconds_count{outcome="failed"}') == 1
            and samples.get('workqueue_item_duration_seconds_count{outcome="succeeded"}') == 2
        )

    try:
        wait_until(scrape, timeout=30)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    assert samples['workqueue_job_completions_total{reason="",result="succeeded"}'] == 2
    assert samples["workqueue_dispatch_conflicts_total"] == 0
    assert samples["workqueue_job_cache_size"] == 3
    assert samples['workqueue_kube_api_seconds_count{verb="create"}'] >= 6
    assert samples['workqueue_item_duration_seconds_count{outcome="succeeded"}'] == 2
    assert samples['workqueue_item_duration_seconds_count{outcome="failed"}'] == 1
    assert "workqueue_oldest_waiting_seconds" not in samples  # nothing waits: no figure


def test_history_limits_keep_the_newest_and_rerun_nothing(
    tmp_path, ambassador_server, marker_worker, cluster
):
    names = [f"clip-{i}.mp4" for i in range(5)]
    make_items(tmp_path / "videos", names)
    server = ambassador_server(tmp_path / "videos")
    r = workqueue(
        *cluster.args(
            server.url, marker_worker, "--once", "--parallelism", "1", "--keep-succeeded", "2"
        )
    )
    assert r.returncode == 0, r.stderr
    assert len(cluster.objects("jobs")) == 2
    assert (
        len([c for c in cluster.objects("configmaps") if c["metadata"].get("ownerReferences")]) == 2
    )  # the rest went with their Jobs
    r = workqueue(*cluster.args(server.url, marker_worker, "--once"))
    assert "5 already done" in r.stdout and len(marker_worker.started()) == 5


def test_orphaned_config_maps_are_removed(apiserver, tmp_path):
    from kube_workqueue.manager.backends.kubernetes.client.api import KubeApi, load_configuration
    from kube_workqueue.manager.backends.kubernetes.client.cache import ClusterCache
    from kube_workqueue.manager.backends.kubernetes.dispatch.backend import KubernetesBackend
    from kube_workqueue.manager.backends.kubernetes.records.record import RecordStore

    api = KubeApi(NS, load_configuration(apiserver.write_kubeconfig(tmp_path / "kc")), qps=0)
    try:
        api.create("configmaps", ko.config_map("thumbs", NS, "gone.mp4", {"name": "gone"}))
        api.create("configmaps", {"metadata": {"name": "unrelated"}})
        cache = ClusterCache(api, ko.queue_selector("thumbs")).start()
        cache.synced.wait(10)
        record = RecordStore(api, "thumbs")
        record.put(ko.item_hash("thumbs", "x"), "succeeded", 1)  # a record shard: kept
        backend = KubernetesBackend(api, "thumbs", ko.PodOptions(image="i:1"), cache, record)
        assert backend.clean_orphans(min_age=3600) == 0  # too young to be called orphaned
        assert backend.clean_orphans(min_age=0) == 1
        left = sorted(c["metadata"]["name"] for c in api.list("configmaps")[0])
        assert left == ["thumbs-record-" + ko.item_hash("thumbs", "x")[0], "unrelated"]
        cache.stop()
    finally:
        api.close()


def test_the_multiworker_pod_spec_makes_a_valid_job():
    import yaml

    from tests.e2e.conftest import REPO

    patch = yaml.safe_load((REPO / "examples" / "multiworker" / "pod-spec.yaml").read_text())
    pod = ko.PodOptions(
        image="registry.example/workqueue-multiworker:0.1.0",
        command=["/opt/multiworker/steps/contact-sheet"],
        pvc="videos",
        mount_path="/data",
        read_only_volume=False,
        pod_spec_patch=patch,
    )
    job = ko.job("thumbs", NS, "a.mp4", 1, pod)
    for version in VERSIONS:
        validate_strictly(job, version, strict=True)
    spec = job["spec"]["template"]["spec"]
    assert [c["name"] for c in spec["initContainers"]] == ["probe", "thumbnail"]
    worker = spec["containers"][0]
    assert {e["name"] for e in worker["env"]} >= {"WORK_ITEM_FILE", "WORK_DIR", "OUTPUT_DIR"}
    assert {m["name"] for m in worker["volumeMounts"]} == {"work-item", "shared", "work"}
    assert {v["name"] for v in spec["volumes"]} == {"work-item", "shared", "work"}


def test_an_api_server_too_old_for_the_promises_is_one_line(tmp_path, cluster, marker_worker):
    cluster.server.version = (1, 28)
    r = workqueue(*cluster.args("http://127.0.0.1:9", marker_worker, "--once"))
    assert r.returncode == 2 and "the Kubernetes API server is 1.28" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_the_client_keeps_a_connection_per_unit_of_work():
    from kube_workqueue.manager.backends.kubernetes.client.api import pool_size

    assert pool_size(2) == 18 and pool_size(50) == 66  # the client's default: 5 per CPU
