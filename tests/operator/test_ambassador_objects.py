"""A queue's ambassador Deployment and Service (`manager.operator.ambassador_objects`): valid
Kubernetes objects (kubernetes-validate, strict), locked down, controlled by the WorkQueue; a
changed plan rolls the pod template; an object of the name the WorkQueue does not own is a
`Conflict`, left alone."""

from __future__ import annotations

import pytest
import yaml

from kube_workqueue.manager.backends.kubernetes.client.api import KubeApi
from kube_workqueue.manager.operator import ambassador_objects
from kube_workqueue.manager.operator.queue_spec import Settings, SpecProblem, plan
from tests.charts.rendering import VERSIONS
from tests.support.apiserver import ApiServer
from tests.support.kube_schemas import validate as validate_strictly

from .conftest import CRD, NS

SETTINGS = Settings(image="registry.example/workqueue:1")


@pytest.fixture
def api():
    server = ApiServer().start()
    server.store.install_crd(yaml.safe_load(CRD.read_text()))
    kube = KubeApi(NS, server.client_configuration(), qps=0)
    yield server, kube
    kube.close()
    server.stop()


def made(server, spec: dict) -> dict:
    body = {"metadata": {"name": "thumbs"}, "spec": {"worker": {"image": "w"}, **spec}}
    obj = server.store.create("workqueue.dev", "workqueues", NS, body)
    return obj


def test_a_folder_queue_gets_a_valid_locked_down_ambassador(api):
    server, kube = api
    obj = made(server, {"source": {"volume": {"claimName": "media"}, "credentialsSecret": "c"}})
    queue_plan = plan(obj, SETTINGS)
    ambassador_objects.ensure(kube, obj, queue_plan.ambassador, SETTINGS)
    deployment = server.store.get("deployments", NS, "thumbs-ambassador")
    service = server.store.get("services", NS, "thumbs-ambassador")
    for doc in (deployment, service):
        clean = {k: v for k, v in doc.items() if k != "status"}
        clean["metadata"] = {k: v for k, v in doc["metadata"].items()
                             if k in ("name", "namespace", "labels", "annotations",
                                      "ownerReferences")}  # fmt: skip
        for version in VERSIONS:
            validate_strictly(clean, version, strict=True)
        (owner,) = doc["metadata"]["ownerReferences"]
        assert owner["uid"] == obj["metadata"]["uid"] and owner["controller"] is True
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["args"][:2] == ["ambassador", "--root=/data"]
    assert container["envFrom"] == [{"secretRef": {"name": "c"}}]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["automountServiceAccountToken"] is False and pod["securityContext"]["runAsNonRoot"]
    (shared,) = [v for v in pod["volumes"] if v["name"] == "shared"]
    assert shared["persistentVolumeClaim"] == {"claimName": "media", "readOnly": True}
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]


@pytest.mark.parametrize(
    ("source", "joins_azure"),
    [
        ({"url": "azblob://mediastore/videos/in/"}, True),
        ({"url": "azblob://mediastore/videos/in/", "credentialsSecret": "sas"}, False),
        ({"url": "gs://media-in/videos/"}, False),  # GKE: the account's annotation is enough
        ({"url": "s3://media-in/videos/"}, False),  # EKS (IRSA): likewise
    ],
    ids=["azure-identity", "azure-secret", "gcs", "s3"],
)
def test_a_cloud_identity_is_the_ambassadors_service_account(api, source, joins_azure):
    """spec.source.serviceAccountName: the ambassador pod runs as it (its annotations carry the
    cloud identity; its API token is still not mounted); an azblob:// queue with no Secret
    joins Azure workload identity by AKS's pod label, and nothing else does."""
    server, kube = api
    obj = made(server, {"source": {**source, "serviceAccountName": "media-reader"}})
    ambassador_objects.ensure(kube, obj, plan(obj, SETTINGS).ambassador, SETTINGS)
    deployment = server.store.get("deployments", NS, "thumbs-ambassador")
    clean = {k: v for k, v in deployment.items() if k != "status"}
    clean["metadata"] = {"name": deployment["metadata"]["name"]}
    for version in VERSIONS:
        validate_strictly(clean, version, strict=True)
    template = deployment["spec"]["template"]
    assert template["spec"]["serviceAccountName"] == "media-reader"
    assert template["spec"]["automountServiceAccountToken"] is False
    joined = template["metadata"]["labels"].get("azure.workload.identity/use")
    assert joined == ("true" if joins_azure else None)
    body = {"metadata": {"name": "plain"},
            "spec": {"worker": {"image": "w"}, "source": {"url": source["url"]}}}  # fmt: skip
    bare = server.store.create("workqueue.dev", "workqueues", NS, body)
    assert plan(bare, SETTINGS).ambassador.service_account is None


def test_a_cloud_storage_queues_secret_is_a_key_file_the_ambassador_alone_reads(api):
    """Google's client takes no key from the environment: a gs:// queue's credentialsSecret is
    mounted read-only (its `key.json`) and named by GOOGLE_APPLICATION_CREDENTIALS - not spread
    as environment variables, as another store's Secret is."""
    server, kube = api
    obj = made(server, {"source": {"url": "gs://media-in/", "credentialsSecret": "gcs-key"}})
    queue_plan = plan(obj, SETTINGS)
    assert queue_plan.secrets == ("gcs-key",)  # checked before anything starts, as any Secret
    ambassador_objects.ensure(kube, obj, queue_plan.ambassador, SETTINGS)
    deployment = server.store.get("deployments", NS, "thumbs-ambassador")
    clean = {k: v for k, v in deployment.items() if k != "status"}
    clean["metadata"] = {"name": deployment["metadata"]["name"]}
    for version in VERSIONS:
        validate_strictly(clean, version, strict=True)
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert "envFrom" not in container
    assert {"name": "GOOGLE_APPLICATION_CREDENTIALS",
            "value": "/var/run/secrets/workqueue/gcs/key.json"} in container["env"]  # fmt: skip
    assert {"name": "gcs-key", "mountPath": "/var/run/secrets/workqueue/gcs",
            "readOnly": True} in container["volumeMounts"]  # fmt: skip
    (volume,) = [v for v in pod["volumes"] if v["name"] == "gcs-key"]
    assert volume["secret"] == {"secretName": "gcs-key", "defaultMode": 0o440,
                                "items": [{"key": "key.json", "path": "key.json"}]}  # fmt: skip


def test_a_service_account_name_the_api_would_refuse_is_refused_by_the_crd(api):
    from tests.support.apiserver.errors import ApiError

    server, _ = api
    with pytest.raises(ApiError, match="serviceAccountName"):
        made(server, {"source": {"url": "gs://b/", "serviceAccountName": "Not A Name"}})


def test_a_changed_plan_rolls_the_template_and_a_foreign_object_is_a_conflict(api):
    server, kube = api
    obj = made(server, {"source": {"url": "redis://r:6379/0?set=jobs"}})
    ambassador_objects.ensure(kube, obj, plan(obj, SETTINGS).ambassador, SETTINGS)
    before = server.store.get("deployments", NS, "thumbs-ambassador")
    obj["spec"]["source"]["suffixes"] = [".json"]
    ambassador_objects.ensure(kube, obj, plan(obj, SETTINGS).ambassador, SETTINGS)
    after = server.store.get("deployments", NS, "thumbs-ambassador")
    assert after["metadata"]["uid"] == before["metadata"]["uid"]
    assert "--suffix=.json" in after["spec"]["template"]["spec"]["containers"][0]["args"]
    server.store.delete("services", NS, "thumbs-ambassador", {})
    server.store.create("", "services", NS, {"metadata": {"name": "thumbs-ambassador"},
                                             "spec": {"ports": [{"port": 80}]}})  # fmt: skip
    with pytest.raises(SpecProblem) as problem:
        ambassador_objects.ensure(kube, obj, plan(obj, SETTINGS).ambassador, SETTINGS)
    assert problem.value.reason == "Conflict"
    assert "ownerReferences" not in server.store.get("services", NS, "thumbs-ambassador")[
        "metadata"]  # fmt: skip
