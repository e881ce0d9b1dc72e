"""KubeApi, the backend's one door to the API: raw JSON, Status reasons, retries that honour
Retry-After, the client-side token bucket, watches - all against the stand-in over HTTP."""

from __future__ import annotations

import threading

import pytest

from manager.backends.kubernetes.api import KubeApi, KubeError, KubeUnavailable, load_configuration
from manager.workqueue import FakeClock

NS = "media"


@pytest.fixture
def api(apiserver, tmp_path):
    sleeps: list[float] = []
    configuration = load_configuration(apiserver.write_kubeconfig(tmp_path / "kubeconfig"))
    kube_api = KubeApi(NS, configuration, qps=0, sleep=sleeps.append)
    kube_api.sleeps = sleeps
    yield kube_api
    kube_api.close()


def cm(name, **labels):
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": labels},
        "data": {"item.json": "{}"},
    }


def test_raw_json_in_and_out(api):
    made = api.create("configmaps", cm("a", q="x"))
    assert isinstance(made, dict) and made["metadata"]["uid"]
    assert api.get("configmaps", "a")["data"] == {"item.json": "{}"}
    items, rv = api.list("configmaps", "q=x")
    assert [i["metadata"]["name"] for i in items] == ["a"] and int(rv) > 0


def test_status_reasons_are_kept(api):
    api.create("configmaps", cm("a"))
    with pytest.raises(KubeError) as exc:
        api.create("configmaps", cm("a"))
    assert (exc.value.status, exc.value.reason) == (409, "AlreadyExists")
    with pytest.raises(KubeError) as exc:
        api.get("configmaps", "nope")
    assert exc.value.reason == "NotFound"


def test_json_patch_guarded_by_resource_version(api):
    made = api.create("configmaps", cm("a"))
    rv = made["metadata"]["resourceVersion"]
    api.patch(
        "configmaps",
        "a",
        [
            {"op": "test", "path": "/metadata/resourceVersion", "value": rv},
            {"op": "add", "path": "/data/x", "value": "1"},
        ],
    )
    with pytest.raises(KubeError) as exc:  # rv moved on: the guard fails
        api.patch(
            "configmaps", "a", [{"op": "test", "path": "/metadata/resourceVersion", "value": rv}]
        )
    assert exc.value.status == 422


def test_delete_with_preconditions(api):
    made = api.create("configmaps", cm("a"))
    with pytest.raises(KubeError) as exc:
        api.delete("configmaps", "a", uid="other")
    assert exc.value.reason == "Conflict"
    api.delete("configmaps", "a", uid=made["metadata"]["uid"])


def test_429_honours_retry_after_and_5xx_backs_off(api, apiserver):
    apiserver.faults.add("429", verb="create", resource="configmaps", retry_after=3)
    apiserver.faults.add("500", verb="create", resource="configmaps")
    api.create("configmaps", cm("a"))
    assert api.sleeps == [3.0, 0.4]  # Retry-After, then backoff 0.2 * 2^1


def test_an_api_that_keeps_failing_is_reported(api, apiserver):
    apiserver.faults.add("500", verb="get", resource="configmaps", count=10)
    with pytest.raises(KubeUnavailable, match="failed after 6 tries"):
        api.get("configmaps", "a")


def test_the_token_bucket_spaces_calls(apiserver, tmp_path):
    sleeps: list[float] = []
    configuration = load_configuration(apiserver.write_kubeconfig(tmp_path / "kc"))
    api = KubeApi(NS, configuration, qps=10, burst=2, sleep=sleeps.append, clock=FakeClock())
    for i in range(5):
        api.create("configmaps", cm(f"c{i}"))
    assert sleeps == pytest.approx([0.1, 0.2, 0.3])  # burst 2, then one token per 0.1 s
    api.close()


def test_watch_resumes_from_a_version_and_reports_410(api):
    first = api.create("configmaps", cm("a", q="x"))
    rv = first["metadata"]["resourceVersion"]
    threading.Timer(0.2, lambda: api.create("configmaps", cm("b", q="x"))).start()
    events = []
    for event in api.watch("configmaps", "q=x", rv, timeout_seconds=2):
        events.append((event["type"], event["object"]["metadata"]["name"]))
        break
    assert events == [("ADDED", "b")]
    for i in range(60):
        api.create("configmaps", cm(f"n{i}"))
    with pytest.raises(KubeError) as exc:
        list(api.watch("configmaps", "", rv, timeout_seconds=2))
    assert exc.value.status == 410
