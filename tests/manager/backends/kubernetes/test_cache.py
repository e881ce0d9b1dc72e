"""The Job cache: one list, then a watch; it survives cut streams and compacted versions, and
only ever holds the queue's Jobs."""

from __future__ import annotations

import pytest

from kube_workqueue.manager.backends.kubernetes.client.api import KubeApi, load_configuration
from kube_workqueue.manager.backends.kubernetes.client.cache import ClusterCache, finished
from kube_workqueue.manager.backends.kubernetes.manifests import objects as ko
from tests.support.servers import wait_until

NS = "media"


@pytest.fixture
def api(apiserver, tmp_path):
    kube_api = KubeApi(NS, load_configuration(apiserver.write_kubeconfig(tmp_path / "kc")), qps=0)
    yield kube_api
    kube_api.close()


def make_job(api, queue, item):
    return api.create("jobs", ko.job(queue, NS, item, 1, ko.PodOptions(image="w:1")))


def test_list_then_watch_sees_every_change_of_the_queue_only(api):
    make_job(api, "q", "before")
    make_job(api, "other", "not-ours")
    seen = []
    cache = ClusterCache(
        api,
        ko.queue_selector("q"),
        on_change=lambda kind, job: seen.append((kind, job["metadata"]["name"])),
    )
    cache.start()
    try:
        wait_until(cache.synced.is_set)
        before = ko.object_name("q", "before")
        assert [j["metadata"]["name"] for j in cache.items()] == [before]
        made = make_job(api, "q", "after")
        after = made["metadata"]["name"]
        wait_until(lambda: cache.get(after) is not None)
        api.patch(
            "jobs", after, {"status": {"conditions": [{"type": "Complete", "status": "True"}]}}
        )
        wait_until(lambda: finished(cache.get(after) or {}) == "Complete")
        api.patch("jobs", after, {"metadata": {"finalizers": None}})
        api.delete("jobs", after)
        wait_until(lambda: cache.get(after) is None)
        assert ("SYNC", before) in seen and ("ADDED", after) in seen
        assert ("DELETED", after) in seen
        assert all(name != ko.object_name("other", "not-ours") for _, name in seen)
    finally:
        cache.stop()


def test_a_cut_stream_and_a_compacted_version_lose_nothing(api, apiserver):
    cache = ClusterCache(api, ko.queue_selector("q"), watch_timeout=1, retry_delay=0.05).start()
    try:
        wait_until(cache.synced.is_set)
        apiserver.faults.add("cut", verb="watch", resource="jobs", after_events=1)
        names = [make_job(api, "q", f"item-{i}")["metadata"]["name"] for i in range(5)]
        wait_until(lambda: all(cache.get(n) for n in names))
        # push the cache's version out of the server's history (50 changes): its next watch,
        # a second later, asks for a compacted version and must list afresh
        cache_relists = cache.relists
        for i in range(60):
            api.create("configmaps", {"metadata": {"name": f"noise-{i}"}})
        wait_until(lambda: cache.relists > cache_relists)  # a 410 made it list afresh
        late = make_job(api, "q", "late")["metadata"]["name"]
        wait_until(lambda: cache.get(late) is not None)
        assert all(cache.get(n) for n in names)
    finally:
        cache.stop()


def test_finished_reads_conditions():
    assert finished({"status": {"conditions": [{"type": "Failed", "status": "True"}]}}) == "Failed"
    assert finished({"status": {"conditions": [{"type": "Complete", "status": "False"}]}}) is None
    assert finished({}) is None
    # Kubernetes 1.31+ says the outcome first, while pods may still run: not finished yet
    # (https://kubernetes.io/docs/concepts/workloads/controllers/job/#termination-of-job-pods)
    for interim in ("FailureTarget", "SuccessCriteriaMet"):
        assert finished({"status": {"conditions": [{"type": interim, "status": "True"}]}}) is None


def test_a_resync_replays_every_cached_job_to_the_handler(api):
    """An informer's resync: a handler that failed on a change gets the Job again."""
    make_job(api, "q", "a")
    seen = []
    cache = ClusterCache(
        api,
        ko.queue_selector("q"),
        on_change=lambda kind, job: seen.append(kind),
        resync_period=0.1,
    )
    cache.start()
    try:
        wait_until(lambda: seen.count("SYNC") >= 3)  # one from the list, then resyncs
        assert cache.relists == 1  # replayed from the cache, not listed again
    finally:
        cache.stop()


def test_a_pod_cache_is_the_same_informer_over_pods(api, apiserver):
    apiserver.store.create(
        "", "pods", NS, {"metadata": {"name": "p1", "labels": {ko.QUEUE_LABEL: "q"}}}
    )
    cache = ClusterCache(api, ko.queue_selector("q"), kind="pods").start()
    try:
        wait_until(cache.synced.is_set)
        assert [p["metadata"]["name"] for p in cache.items()] == ["p1"]
    finally:
        cache.stop()
