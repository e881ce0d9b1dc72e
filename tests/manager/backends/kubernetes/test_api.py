"""KubeApi, the backend's one door to the API: raw JSON, Status reasons, retries that honour
Retry-After, the client-side token bucket, watches - all against the stand-in over HTTP."""

from __future__ import annotations

import threading

import pytest

from kube_workqueue.manager.backends.kubernetes.client.api import (
    KubeApi,
    KubeError,
    KubeUnavailable,
    load_configuration,
)
from kube_workqueue.manager.workqueue import FakeClock

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


def test_errors_are_classified_by_reason_then_by_http_code(api, apiserver):
    """As client-go's errors.IsNotFound / IsConflict: a reason Kubernetes defines decides; an
    answer from elsewhere (a proxy's page, an aggregated API's own reason) goes by its code."""
    from kube_workqueue.manager.backends.kubernetes.client.api import classify

    apiserver.faults.add("foreign", verb="get", resource="configmaps", code=404)
    with pytest.raises(KubeError) as exc:
        api.get("configmaps", "anything")
    assert (exc.value.status, exc.value.reason) == (404, "NotFound")
    apiserver.faults.add("foreign", verb="patch", resource="configmaps", code=409, reason="Oops")
    api.create("configmaps", cm("a"))
    with pytest.raises(KubeError) as exc:
        api.patch("configmaps", "a", {"data": {"k": "v"}})
    assert exc.value.reason == "Conflict"
    assert classify(409, "AlreadyExists") == "AlreadyExists"  # a defined reason is kept
    assert classify(404, "") == "NotFound" and classify(418, "Teapot") == "Unknown"
    assert classify(500, "NotFound") == "NotFound"  # the reason wins when Kubernetes defines it
    # a create's 409 without a reason (kmock's answer) means the name is taken: the API
    # conventions give a create no other conflict; an update's stays a Conflict
    apiserver.faults.add("foreign", verb="create", resource="configmaps", code=409, reason="")
    with pytest.raises(KubeError) as exc:
        api.create("configmaps", cm("b"))
    assert exc.value.reason == "AlreadyExists"
    assert classify(409, "", "create") == "AlreadyExists"
    assert classify(409, "", "patch") == "Conflict"


def test_a_record_behind_a_proxy_that_answers_404_pages_reads_as_absent(api, apiserver):
    """What the backend does with such an answer: a missing record shard is created, not a
    crash."""
    from kube_workqueue.manager.backends.kubernetes.records.record import RecordStore

    record = RecordStore(api, "thumbs")
    apiserver.faults.add("foreign", verb="get", resource="configmaps", code=404)
    record.reload("a0")  # the shard "thumbs-record-a" as a proxy's 404 page: nothing known
    assert record.get("a0") is None
    record.put("a0", "succeeded", 1)
    assert record.get("a0") == ("succeeded", 1)


def test_an_outage_is_one_warning_not_one_per_retry(api, apiserver, caplog):
    """Twelve failed tries over two calls: one warning; one line again when it answers."""
    import logging

    apiserver.faults.add("500", verb="get", resource="configmaps", count=12)
    with caplog.at_level(logging.WARNING):
        for _ in range(2):
            with pytest.raises(KubeUnavailable):
                api.get("configmaps", "a")
        with pytest.raises(KubeError):
            api.get("configmaps", "a")  # answered (404): the outage is over
    lines = [r.getMessage() for r in caplog.records]
    assert len([m for m in lines if "is not answering" in m]) == 1, lines
    assert len([m for m in lines if "answering again" in m]) == 1, lines


def test_an_unreachable_server_gets_no_urllib3_warning_per_retry(tmp_path, caplog):
    import logging
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    kubeconfig = tmp_path / "kc"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: x\n"
        "clusters:\n- name: c\n  cluster:\n"
        f"    server: http://127.0.0.1:{port}\n"
        "contexts:\n- name: x\n  context:\n    cluster: c\n    user: u\n"
        "users:\n- name: u\n  user:\n    token: t\n"
    )
    api = KubeApi(NS, load_configuration(str(kubeconfig)), qps=0, sleep=lambda s: None)
    try:
        with caplog.at_level(logging.WARNING), pytest.raises(KubeUnavailable) as exc:
            api.get("configmaps", "a")
    finally:
        api.close()
    assert "Connection refused" in str(exc.value)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and "is not answering" in lines[0], lines


def test_a_fenced_client_writes_nothing_and_waits_for_the_write_in_flight(api, monkeypatch):
    """A queue's run abandoned by the operator (`QueueRun.fence`): every write refused from
    then on, reads still answered, and `fence` returns only once a write in flight has ended."""
    api.create("configmaps", cm("before"))
    entered, release = threading.Event(), threading.Event()
    send = api._send

    def slow_send(verb, kind, name, body, timeout, query):
        if verb == "create" and body["metadata"]["name"] == "in-flight":
            entered.set()
            release.wait(30)
        return send(verb, kind, name, body, timeout, query)

    monkeypatch.setattr(api, "_send", slow_send)
    writer = threading.Thread(target=api.create, args=("configmaps", cm("in-flight")))
    writer.start()
    assert entered.wait(30)
    assert api.fence(0.2) is False  # the write in flight has not ended
    fenced = threading.Thread(target=lambda: results.append(api.fence(30)))
    results: list[bool] = []
    fenced.start()
    release.set()
    fenced.join(30)
    writer.join(30)
    assert results == [True]
    with pytest.raises(KubeUnavailable) as refused:
        api.create("configmaps", cm("after"))
    assert refused.value.reason == "Fenced"
    with pytest.raises(KubeUnavailable):
        api.delete("configmaps", "before")
    assert api.find("configmaps", "in-flight") is not None  # reads go on
    assert api.find("configmaps", "after") is None
