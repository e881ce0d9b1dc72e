"""The API-server stand-in behaves as kube-apiserver does where the manager relies on it -
checked through the official `kubernetes` client over real HTTP."""

from __future__ import annotations

import json
import socket
from urllib.parse import urlsplit

import pytest
from kubernetes.client.rest import ApiException

from tests.kube.stand_in_objects import NS, cm, job, raw, read_watch
from tests.support.apiserver import selector_matches


def test_create_sets_uid_timestamp_and_increasing_resource_versions(kube):
    a = raw(kube.core.create_namespaced_config_map(NS, cm("a"), _preload_content=False))
    b = raw(kube.core.create_namespaced_config_map(NS, cm("b"), _preload_content=False))
    assert a["metadata"]["uid"] and a["metadata"]["creationTimestamp"].endswith("Z")
    assert int(b["metadata"]["resourceVersion"]) > int(a["metadata"]["resourceVersion"])
    got = kube.core.read_namespaced_config_map("a", NS)
    assert got.data == {"k": "v"} and got.metadata.namespace == NS


def test_a_duplicate_name_is_409_already_exists_with_a_status_body(kube):
    kube.batch.create_namespaced_job(NS, job("j"))
    with pytest.raises(ApiException) as exc:
        kube.batch.create_namespaced_job(NS, job("j"))
    assert exc.value.status == 409
    body = json.loads(exc.value.body)
    assert body["kind"] == "Status" and body["reason"] == "AlreadyExists"


def test_generate_name(kube):
    body = cm(None)
    body["metadata"] = {"generateName": "record-"}
    made = kube.core.create_namespaced_config_map(NS, body)
    assert made.metadata.name.startswith("record-") and len(made.metadata.name) == 12


def test_update_with_a_stale_resource_version_is_409_conflict(kube):
    made = raw(kube.core.create_namespaced_config_map(NS, cm("a"), _preload_content=False))
    fresh = dict(made, data={"k": "2"})
    kube.core.replace_namespaced_config_map("a", NS, fresh)
    with pytest.raises(ApiException) as exc:
        kube.core.replace_namespaced_config_map("a", NS, dict(made, data={"k": "3"}))
    assert exc.value.status == 409 and json.loads(exc.value.body)["reason"] == "Conflict"


def test_an_update_whose_body_names_another_object_is_400(kube):
    made = raw(kube.core.create_namespaced_config_map(NS, cm("a"), _preload_content=False))
    for named in ("b", ""):
        body = dict(made, metadata={**made["metadata"], "name": named})
        with pytest.raises(ApiException) as exc:
            kube.core.replace_namespaced_config_map("a", NS, body)
        assert exc.value.status == 400 and json.loads(exc.value.body)["reason"] == "BadRequest"
    assert kube.core.read_namespaced_config_map("a", NS).data == {"k": "v"}


def test_a_request_whose_body_is_cut_short_is_never_acted_on(kube, apiserver):
    """A client killed between its headers and its body (urllib3 sends them apart): the real
    server reads to the end of the body it was promised, meets the end of the connection, and
    acts on none of it - the stand-in once took the missing body for an empty object."""
    made = kube.core.create_namespaced_config_map(NS, cm("a"))
    host, port = urlsplit(apiserver.url).hostname, urlsplit(apiserver.url).port
    with socket.create_connection((host, port), timeout=30) as conn:
        conn.sendall(
            f"PUT /api/v1/namespaces/{NS}/configmaps/a HTTP/1.1\r\nHost: {host}\r\n"
            "Content-Type: application/json\r\nContent-Length: 400\r\n\r\n{}".encode()
        )
        conn.shutdown(socket.SHUT_WR)
        assert conn.recv(4096) == b""  # no answer: the connection is closed
    got = kube.core.read_namespaced_config_map("a", NS)
    assert got.data == {"k": "v"}
    assert got.metadata.resource_version == made.metadata.resource_version


def test_label_selectors(kube):
    kube.core.create_namespaced_config_map(NS, cm("a", {"q": "x", "tier": "1"}))
    kube.core.create_namespaced_config_map(NS, cm("b", {"q": "x", "tier": "2"}))
    kube.core.create_namespaced_config_map(NS, cm("c", {"q": "y"}))

    def names(selector):
        return sorted(
            i.metadata.name
            for i in kube.core.list_namespaced_config_map(NS, label_selector=selector).items
        )

    assert names("q=x") == ["a", "b"]
    assert names("q==x,tier!=1") == ["b"]
    assert names("tier in (1, 2)") == ["a", "b"]
    assert names("q notin (x)") == ["c"]
    assert names("tier") == ["a", "b"] and names("!tier") == ["c"]
    assert selector_matches("", {})


def test_patch_merge_and_json_patch(kube):
    kube.core.create_namespaced_config_map(NS, cm("a"))
    kube.core.patch_namespaced_config_map("a", NS, {"data": {"n": "1"}})
    kube.core.patch_namespaced_config_map(
        "a", NS, [{"op": "add", "path": "/metadata/labels/x", "value": "y"}]
    )
    got = kube.core.read_namespaced_config_map("a", NS)
    assert got.data == {"k": "v", "n": "1"} and got.metadata.labels == {"x": "y"}


def test_a_dict_patch_of_a_built_in_kind_is_a_strategic_merge(kube):
    """The official client sends a dict PATCH of a built-in kind as
    application/strategic-merge-patch+json; the API server merges lists with a patch merge key
    element by element (https://kubernetes.io/docs/tasks/manage-kubernetes-objects/update-api-object-kubectl-patch/#notes-on-the-strategic-merge-patch):
    a container patched by name keeps its siblings, env entries merge by name, finalizers
    are added to, a `$patch: delete` element goes."""
    body = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "smp", "finalizers": ["a/one"]},
        "spec": {
            "selector": {"matchLabels": {"app": "smp"}},
            "template": {
                "metadata": {"labels": {"app": "smp"}},
                "spec": {
                    "containers": [
                        {"name": "w", "image": "i:1", "env": [{"name": "A", "value": "1"}]},
                        {"name": "side", "image": "s:1"},
                    ]
                },
            },
        },
    }
    kube.apps.create_namespaced_deployment(NS, body)
    patch = {
        "metadata": {"finalizers": ["b/two"], "labels": {"l": "v"}},
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {"name": "w", "env": [{"name": "B", "value": "2"}]},
                        {"name": "side", "$patch": "delete"},
                    ]
                }
            }
        },
    }
    got = raw(kube.apps.patch_namespaced_deployment("smp", NS, patch, _preload_content=False))
    containers = got["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["w"] and containers[0]["image"] == "i:1"
    assert containers[0]["env"] == [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]
    assert got["metadata"]["finalizers"] == ["a/one", "b/two"]


def test_finalizers_hold_deletion_until_removed(kube):
    kube.batch.create_namespaced_job(
        NS, dict(job("j"), metadata={"name": "j", "finalizers": ["workqueue.dev/record"]})
    )
    kube.batch.delete_namespaced_job("j", NS)
    held = kube.batch.read_namespaced_job("j", NS)
    assert held.metadata.deletion_timestamp is not None
    kube.batch.patch_namespaced_job("j", NS, {"metadata": {"finalizers": None}})
    with pytest.raises(ApiException) as exc:
        kube.batch.read_namespaced_job("j", NS)
    assert exc.value.status == 404


def test_owner_references_are_garbage_collected(kube):
    j = kube.batch.create_namespaced_job(NS, job("j"))
    ref = {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": j.metadata.uid}
    kube.core.create_namespaced_config_map(NS, cm("owned", ownerReferences=[ref]))
    kube.core.create_namespaced_config_map(NS, cm("free"))
    kube.batch.delete_namespaced_job("j", NS, propagation_policy="Background")
    left = [i.metadata.name for i in kube.core.list_namespaced_config_map(NS).items]
    assert left == ["free"]


def test_delete_preconditions(kube):
    made = kube.core.create_namespaced_config_map(NS, cm("a"))
    with pytest.raises(ApiException) as exc:
        kube.core.delete_namespaced_config_map("a", NS, body={"preconditions": {"uid": "nope"}})
    assert exc.value.status == 409
    kube.core.delete_namespaced_config_map(
        "a", NS, body={"preconditions": {"uid": made.metadata.uid}}
    )


def test_a_list_with_a_limit_comes_in_pages_joined_by_continue_tokens(kube):
    """https://kubernetes.io/docs/reference/using-api/api-concepts/#retrieving-large-results-sets-in-chunks:
    `limit` caps a page, `metadata.continue` fetches the next, every page carries the first
    page's resourceVersion, `remainingItemCount` counts what is left."""
    for i in range(7):
        kube.core.create_namespaced_config_map(NS, cm(f"p{i}", {"paged": "yes"}))
    names, token, versions = [], None, set()
    while True:
        page = raw(
            kube.core.list_namespaced_config_map(
                NS, label_selector="paged=yes", limit=3, _continue=token, _preload_content=False
            )
        )
        names += [i["metadata"]["name"] for i in page["items"]]
        versions.add(page["metadata"]["resourceVersion"])
        token = page["metadata"].get("continue")
        if not token:
            assert "remainingItemCount" not in page["metadata"]
            break
        assert page["metadata"]["remainingItemCount"] == 7 - len(names)
        assert len(page["items"]) == 3
    assert names == [f"p{i}" for i in range(7)] and len(versions) == 1
    with pytest.raises(ApiException) as bad:
        kube.core.list_namespaced_config_map(NS, limit=3, _continue="not-a-token")
    assert bad.value.status == 400


@pytest.mark.parametrize(
    "name, labels",
    [
        ("Upper", {}),
        ("under_score", {}),
        ("x" * 64, {}),  # a Job's name is a label value on its pods: 63 at most
        ("ok", {"bad key!": "v"}),
        ("ok", {"k": "v" * 64}),
        ("ok", {"k": "-starts-with-dash"}),
        ("ok", {"Not_A.Domain/k": "v"}),
    ],
)
def test_names_and_labels_the_api_server_refuses_are_422(kube, name, labels):
    """https://kubernetes.io/docs/concepts/overview/working-with-objects/names/ and
    https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#syntax-and-character-set"""
    with pytest.raises(ApiException) as refused:
        kube.batch.create_namespaced_job(NS, job(name, labels))
    assert refused.value.status == 422 and json.loads(refused.value.body)["reason"] == "Invalid"


def test_a_job_pod_template_must_not_restart_always_and_replacement_needs_failed(kube):
    """https://kubernetes.io/docs/concepts/workloads/controllers/job/#pod-template (restartPolicy
    Never or OnFailure) and #pod-replacement-policy (with a podFailurePolicy, only Failed)."""
    always = job("always")
    always["spec"]["template"]["spec"]["restartPolicy"] = "Always"
    replaced = job("replaced")
    replaced["spec"]["podReplacementPolicy"] = "TerminatingOrFailed"
    replaced["spec"]["podFailurePolicy"] = {
        "rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [3]}}]
    }
    for body in (always, replaced):
        with pytest.raises(ApiException) as refused:
            kube.batch.create_namespaced_job(NS, body)
        assert refused.value.status == 422
    replaced["spec"]["podReplacementPolicy"] = "Failed"
    kube.batch.create_namespaced_job(NS, replaced)  # the allowed pair


def test_faults_429_with_retry_after_500_and_a_cut_watch(kube, apiserver):
    apiserver.faults.add("429", verb="create", resource="configmaps", retry_after=3)
    with pytest.raises(ApiException) as exc:
        kube.core.create_namespaced_config_map(NS, cm("a"))
    assert exc.value.status == 429 and exc.value.headers["Retry-After"] == "3"
    apiserver.faults.add("500", verb="list", resource="jobs")
    with pytest.raises(ApiException) as exc:
        kube.batch.list_namespaced_job(NS)
    assert exc.value.status == 500
    kube.core.create_namespaced_config_map(NS, cm("a"))
    kube.core.create_namespaced_config_map(NS, cm("b"))
    apiserver.faults.add("cut", verb="watch", resource="configmaps", after_events=1)
    stream = kube.core.list_namespaced_config_map(NS, watch=True, _preload_content=False)
    assert len(read_watch(stream, 5, timeout=2)) == 1


def test_leases_and_events(kube):
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "thumbs-leader"},
        "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15},
    }
    made = kube.coordination.create_namespaced_lease(NS, lease)
    made.spec.holder_identity = "b"
    kube.coordination.replace_namespaced_lease("thumbs-leader", NS, made)
    assert kube.coordination.read_namespaced_lease("thumbs-leader", NS).spec.holder_identity == "b"
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": "j."},
        "involvedObject": {"kind": "Job", "name": "j", "namespace": NS},
        "reason": "Completed",
        "message": "done",
        "type": "Normal",
    }
    kube.core.create_namespaced_event(NS, event)
    assert kube.core.list_namespaced_event(NS).items[0].reason == "Completed"


def test_requests_are_recorded_for_rbac(kube, apiserver):
    kube.core.create_namespaced_config_map(NS, cm("a"))
    kube.batch.list_namespaced_job(NS)
    assert {("create", "configmaps", ""), ("list", "batch/jobs", "")} <= apiserver.verbs_seen()


def test_unknown_resources_are_404_status(kube):
    with pytest.raises(ApiException) as exc:
        kube.core.list_namespaced_persistent_volume_claim(NS)
    assert exc.value.status == 404 and json.loads(exc.value.body)["kind"] == "Status"


def test_nodes_are_cluster_scoped_and_namespaced_kinds_list_across_namespaces(apiserver):
    """As the real server: a Node has no namespace in its path (404 under one), and a
    namespaced kind is listed across namespaces without one, but never created there."""
    import requests

    base = apiserver.url
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "labels": {"a": "b"}}}
    assert requests.post(f"{base}/api/v1/nodes", json=node, timeout=10).status_code == 201
    listed = requests.get(f"{base}/api/v1/nodes", timeout=10).json()
    assert [n["metadata"]["name"] for n in listed["items"]] == ["n1"]
    assert requests.get(f"{base}/api/v1/namespaces/x/nodes", timeout=10).status_code == 404
    assert requests.get(f"{base}/api/v1/configmaps", timeout=10).status_code == 200
    made = requests.post(f"{base}/api/v1/configmaps", json={"metadata": {"name": "c"}}, timeout=10)
    assert made.status_code == 404
