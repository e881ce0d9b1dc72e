"""The WorkQueue CRD's CEL rules (`x-kubernetes-validations`), evaluated by a real CEL
implementation (cel-python, through the stand-in's `cel` module) - each rule compiles, holds for
the specs it should allow and breaks for the ones it should refuse - and enforced by the
stand-in on create, patch and /scale as the API server does (422 Invalid with the rule's
message)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.support.apiserver.cel import compiled, holds

CRD = Path(__file__).resolve().parents[2] / "charts/workqueue/crds/workqueues.workqueue.dev.yaml"
G, V, NS, P = "workqueue.dev", "v1beta1", "media", "workqueues"


def rules(schema: dict, where: str = "") -> list[tuple[str, str]]:
    found = [(where, r["rule"]) for r in schema.get("x-kubernetes-validations") or []]
    for name, sub in (schema.get("properties") or {}).items():
        found += rules(sub, f"{where}.{name}")
    return found


def spec_schema() -> dict:
    doc = yaml.safe_load(CRD.read_text())
    return doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def test_every_rule_compiles_and_none_is_a_transition_rule():
    found = rules(spec_schema())
    assert {where for where, _ in found} == {".spec", ".spec.source", ".spec.source.url"}
    assert len(found) == 8
    for _, rule in found:
        compiled(rule)


def spec_rule(fragment: str) -> str:
    return next(r for w, r in rules(spec_schema()) if w == ".spec" and fragment in r)


@pytest.mark.parametrize(
    ("fragment", "allowed", "refused"),
    [
        ("ledgerSecret", [{}, {"batchSize": 8}, {"ledgerSecret": {"name": "l"}, "batchSize": 1}],
         [{"ledgerSecret": {"name": "l"}, "batchSize": 8}]),
        ("minParallelism <=", [{"autoscale": {"maxParallelism": 4}},
                               {"autoscale": {"minParallelism": 4, "maxParallelism": 4}}],
         [{"autoscale": {"minParallelism": 5, "maxParallelism": 4}}]),
        ("limits.all", [{"limits": ["a=9"]}, {"autoscale": {"maxParallelism": 4},
                                              "limits": ["x=y=4", "*=1"]}],
         [{"autoscale": {"maxParallelism": 4}, "limits": ["acme=5"]}]),
        ("weights", [{"weights": []}, {"weights": ["a=2"], "fair": True}],
         [{"weights": ["a=2"]}, {"weights": ["a=2"], "fair": False}]),
    ],
)  # fmt: skip
def test_the_cross_field_rules(fragment, allowed, refused):
    rule = spec_rule(fragment)
    for spec in allowed:
        assert holds(rule, spec), (rule, spec)
    for spec in refused:
        assert not holds(rule, spec), (rule, spec)


def test_the_source_rule_wants_exactly_one_of_url_and_volume():
    (rule,) = [r for w, r in rules(spec_schema()) if w == ".spec.source"]
    assert holds(rule, {"url": "s3://b/"}) and holds(rule, {"volume": {"claimName": "m"}})
    assert not holds(rule, {}) and not holds(rule, {"url": "s3://b/", "volume": {}})


def test_the_url_rule_refuses_a_credential_in_a_source_url():
    (rule,) = [r for w, r in rules(spec_schema()) if w == ".spec.source.url"]
    allowed = ["s3://b/videos/", "kafka://k-0:9092,k-1:9092/renders?name=key",
               "nats://nats:4222/RENDERS?subject=a.>&name=subject",
               "https://items.example/api?x=a@b", "redis://redis:6379/0?stream=s",
               "gs://media-in/videos/", "azblob://acct/videos-in/new/"]  # fmt: skip
    refused = ["kafka://me:pw@k:9092/t", "redis://:secret@redis:6379/0?set=k",
               "nats://TOKEN@nats:4222/S", "https://user@items.example/",
               "redis://redis:6379/0?set=k&Password=x", "https://i.example/?token=t",
               "azblob://acct/c1/?sv=2022-11-02&sp=rl&sig=abc%3D"]  # a SAS token  # fmt: skip
    assert [url for url in allowed if not holds(rule, url)] == []
    assert [url for url in refused if holds(rule, url)] == []


@pytest.fixture
def custom(apiserver):
    apiserver.store.install_crd(yaml.safe_load(CRD.read_text()))
    api_client = client.ApiClient(apiserver.client_configuration())
    yield client.CustomObjectsApi(api_client)
    api_client.close()


def queue(**spec) -> dict:
    base = {"source": {"url": "s3://b/"}, "worker": {"image": "w"}}
    return {"apiVersion": f"{G}/{V}", "kind": "WorkQueue", "metadata": {"name": "q"},
            "spec": {**base, **spec}}  # fmt: skip


def test_the_stand_in_refuses_a_broken_rule_on_every_write(custom):
    with pytest.raises(ApiException) as refused:
        custom.create_namespaced_custom_object(
            G, V, NS, P, queue(ledgerSecret={"name": "l"}, batchSize=4)
        )
    assert refused.value.status == 422 and "cannot share a ledger" in refused.value.body
    with pytest.raises(ApiException) as alone:
        custom.create_namespaced_custom_object(G, V, NS, P, queue(drain=True))
    assert alone.value.status == 422 and "drain is for a manager of a shared ledger" in (
        alone.value.body
    )
    with pytest.raises(ApiException) as unplaced:
        custom.create_namespaced_custom_object(G, V, NS, P, queue(placement={"offers": ["a=b"]}))
    assert unplaced.value.status == 422 and "among the managers of a shared ledger" in (
        unplaced.value.body
    )
    with pytest.raises(ApiException) as secret:
        custom.create_namespaced_custom_object(
            G, V, NS, P, queue(source={"url": "kafka://me:pw@kafka:9092/renders"})
        )
    assert secret.value.status == 422 and "credentialsSecret" in secret.value.body
    made = custom.create_namespaced_custom_object(
        G, V, NS, P, queue(autoscale={"maxParallelism": 4}, limits=["acme=3"])
    )
    assert made["spec"]["deletionPolicy"] == "Retain"
    with pytest.raises(ApiException) as patched:
        custom.patch_namespaced_custom_object(G, V, NS, P, "q", {"spec": {"limits": ["acme=9"]}})
    assert patched.value.status == 422 and "never binds" in patched.value.body
    with pytest.raises(ApiException) as both:
        custom.patch_namespaced_custom_object(
            G, V, NS, P, "q", {"spec": {"source": {"volume": {"claimName": "m"}}}}
        )
    assert both.value.status == 422 and "exactly one of" in both.value.body
    # the old version still serves the same object, at its own apiVersion
    old = custom.get_namespaced_custom_object(G, "v1alpha1", NS, P, "q")
    assert old["apiVersion"] == f"{G}/v1alpha1" and old["spec"]["limits"] == ["acme=3"]
    scaled = custom.patch_namespaced_custom_object_scale(
        G, V, NS, P, "q", {"spec": {"replicas": 0}}
    )
    assert scaled["spec"]["replicas"] == 0  # scale to zero passes every rule
