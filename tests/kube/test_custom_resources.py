"""The stand-in serves a CustomResourceDefinition as kube-apiserver does - the chart's own
WorkQueue CRD, through the official client's CustomObjectsApi over real HTTP: discovery,
defaults and validation, the status subresource, the scale subresource (autoscaling/v1)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

NS = "media"
CRD = Path(__file__).resolve().parents[2] / "charts/workqueue/crds/workqueues.workqueue.dev.yaml"
G, V, P = "workqueue.dev", "v1alpha1", "workqueues"


@pytest.fixture
def custom(apiserver):
    api_client = client.ApiClient(apiserver.client_configuration())
    yield client.CustomObjectsApi(api_client), api_client
    api_client.close()


def installed(apiserver):
    apiserver.store.install_crd(yaml.safe_load(CRD.read_text()))


def queue(name="thumbs", **spec):
    return {"apiVersion": f"{G}/{V}", "kind": "WorkQueue", "metadata": {"name": name},
            "spec": spec}  # fmt: skip


def test_discovery_says_whether_the_crd_is_installed(apiserver, custom):
    import requests

    api, _ = custom
    assert requests.get(f"{apiserver.url}/apis/{G}/{V}", timeout=5).status_code == 404
    with pytest.raises(ApiException) as missing:
        api.list_namespaced_custom_object(G, V, NS, P)
    assert missing.value.status == 404
    installed(apiserver)
    answer = requests.get(f"{apiserver.url}/apis/{G}/{V}", timeout=5).json()
    names = {r["name"] for r in answer["resources"]}
    assert names == {"workqueues", "workqueues/status", "workqueues/scale"}
    assert api.list_namespaced_custom_object(G, V, NS, P)["items"] == []


def test_defaults_and_validation_on_every_write(apiserver, custom):
    installed(apiserver)
    api, _ = custom
    made = api.create_namespaced_custom_object(G, V, NS, P, queue())
    assert made["spec"] == {"parallelism": 1, "paused": False, "deletionPolicy": "Retain"}
    with pytest.raises(ApiException) as bad:
        api.create_namespaced_custom_object(G, V, NS, P, queue("other", parallelism=-1))
    assert bad.value.status == 422 and "greater than or equal to 0" in bad.value.body
    with pytest.raises(ApiException) as wrong_type:
        api.patch_namespaced_custom_object(G, V, NS, P, "thumbs", {"spec": {"paused": "yes"}})
    assert wrong_type.value.status == 422


def test_a_strategic_merge_patch_of_a_custom_resource_is_415(apiserver, custom):
    """A custom resource has no patch merge keys: the API server answers a strategic merge
    patch with 415 Unsupported Media Type
    (https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#advanced-topics:
    "strategic merge patch is not supported" for custom resources) - merge and JSON patch work."""
    installed(apiserver)
    api, _ = custom
    api.create_namespaced_custom_object(G, V, NS, P, queue())
    with pytest.raises(ApiException) as refused:
        api.patch_namespaced_custom_object(
            G, V, NS, P, "thumbs", {"spec": {"paused": True}},
            _content_type="application/strategic-merge-patch+json",
        )  # fmt: skip
    assert refused.value.status == 415
    merged = api.patch_namespaced_custom_object(G, V, NS, P, "thumbs", {"spec": {"paused": True}})
    assert merged["spec"]["paused"] is True


def test_status_is_written_through_its_subresource_only(apiserver, custom):
    installed(apiserver)
    api, _ = custom
    body = queue(parallelism=2)
    body["status"] = {"replicas": 99}
    made = api.create_namespaced_custom_object(G, V, NS, P, body)
    assert "status" not in made and made["metadata"]["generation"] == 1  # dropped on create
    status = api.patch_namespaced_custom_object_status(
        G, V, NS, P, "thumbs", {"status": {"replicas": 2, "counts": {"pending": 5}}}
    )
    assert status["status"]["replicas"] == 2 and status["metadata"]["generation"] == 1
    main = api.patch_namespaced_custom_object(
        G, V, NS, P, "thumbs", {"spec": {"parallelism": 3}, "status": {"replicas": 0}}
    )
    assert main["status"]["replicas"] == 2  # the main resource never writes status
    assert main["metadata"]["generation"] == 2  # spec changed
    again = api.patch_namespaced_custom_object_status(
        G, V, NS, P, "thumbs", {"spec": {"parallelism": 7}, "status": {"replicas": 3}}
    )
    assert again["spec"]["parallelism"] == 3 and again["metadata"]["generation"] == 2


def test_the_scale_subresource_reads_and_sets_parallelism(apiserver, custom):
    installed(apiserver)
    api, _ = custom
    api.create_namespaced_custom_object(G, V, NS, P, queue(parallelism=2))
    api.patch_namespaced_custom_object_status(
        G, V, NS, P, "thumbs", {"status": {"replicas": 2, "selector": "workqueue.dev/queue=thumbs"}}
    )
    scale = api.get_namespaced_custom_object_scale(G, V, NS, P, "thumbs")
    assert scale["kind"] == "Scale" and scale["apiVersion"] == "autoscaling/v1"
    assert scale["spec"] == {"replicas": 2}
    assert scale["status"] == {"replicas": 2, "selector": "workqueue.dev/queue=thumbs"}
    patched = api.patch_namespaced_custom_object_scale(
        G, V, NS, P, "thumbs", {"spec": {"replicas": 0}}
    )
    assert patched["spec"]["replicas"] == 0
    obj = api.get_namespaced_custom_object(G, V, NS, P, "thumbs")
    assert obj["spec"]["parallelism"] == 0 and obj["metadata"]["generation"] == 2
    stale = {**scale, "spec": {"replicas": 5}}  # the resourceVersion read before the patch
    with pytest.raises(ApiException) as conflict:
        api.replace_namespaced_custom_object_scale(G, V, NS, P, "thumbs", stale)
    assert conflict.value.status == 409
    fresh = api.get_namespaced_custom_object_scale(G, V, NS, P, "thumbs")
    api.replace_namespaced_custom_object_scale(
        G, V, NS, P, "thumbs", {**fresh, "spec": {"replicas": 4}}
    )
    assert api.get_namespaced_custom_object(G, V, NS, P, "thumbs")["spec"]["parallelism"] == 4
    with pytest.raises(ApiException) as negative:
        api.patch_namespaced_custom_object_scale(G, V, NS, P, "thumbs", {"spec": {"replicas": -1}})
    assert negative.value.status == 422


def test_custom_objects_are_listed_and_watched_by_label(apiserver, custom):
    installed(apiserver)
    api, _ = custom
    body = queue()
    body["metadata"]["labels"] = {"workqueue.dev/queue": "thumbs"}
    api.create_namespaced_custom_object(G, V, NS, P, body)
    api.create_namespaced_custom_object(G, V, NS, P, queue("other"))
    listed = api.list_namespaced_custom_object(
        G, V, NS, P, label_selector="workqueue.dev/queue=thumbs"
    )
    assert [o["metadata"]["name"] for o in listed["items"]] == ["thumbs"]
    assert listed["kind"] == "WorkQueueList"
    stream = api.list_namespaced_custom_object(
        G, V, NS, P, watch=True, resource_version=listed["metadata"]["resourceVersion"],
        timeout_seconds=2, label_selector="workqueue.dev/queue=thumbs", _preload_content=False,
    )  # fmt: skip
    api.patch_namespaced_custom_object_scale(G, V, NS, P, "thumbs", {"spec": {"replicas": 3}})
    events = [yaml.safe_load(line) for line in stream.read().splitlines() if line.strip()]
    assert [(e["type"], e["object"]["spec"]["parallelism"]) for e in events] == [("MODIFIED", 3)]
