"""The WorkQueue resource in the chart: the CRD (valid, structural, with its subresources and
columns) and the example WorkQueue checked against the CRD's own schema; autoscaling.mode
rendering exactly one decider - the manager's --autoscale, a KEDA ScaledObject or an HPA, each
aimed at the WorkQueue's scale subresource."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from helm_python import lint

from tests.support.apiserver.custom import Definition, apply_defaults
from tests.support.kube_schemas import validate as validate_strictly

from .rendering import CHART, VERSIONS, by_kind, containers, render

CRD = CHART / "crds" / "workqueues.workqueue.dev.yaml"
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "workqueue" / "workqueue.yaml"


def crd() -> dict:
    return yaml.safe_load(CRD.read_text())


def test_the_crd_is_valid_with_scale_status_and_columns():
    doc = crd()
    for version in VERSIONS:
        validate_strictly(doc, version, strict=True)
    served, old = doc["spec"]["versions"]
    assert (served["name"], served["storage"], old["name"], old["storage"]) == (
        "v1beta1", True, "v1alpha1", False)  # fmt: skip
    assert old["served"] and old["deprecated"] and old["schema"] == served["schema"]
    assert doc["spec"]["conversion"] == {"strategy": "None"}
    assert served["subresources"]["scale"] == {
        "specReplicasPath": ".spec.parallelism",
        "statusReplicasPath": ".status.replicas",
        "labelSelectorPath": ".status.selector",
    }
    assert "status" in served["subresources"]
    columns = [c["name"] for c in served["additionalPrinterColumns"]]
    assert columns == ["Ready", "Parallelism", "Pending", "Running", "Succeeded", "Failed",
                       "Verdict", "Age"]  # fmt: skip
    spec = served["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    assert spec["parallelism"]["minimum"] == 0 and spec["parallelism"]["default"] == 1


def test_the_example_workqueue_meets_the_crds_schema():
    import jsonschema

    definition = Definition(crd())
    example = yaml.safe_load(EXAMPLE.read_text())
    assert example["apiVersion"] == definition.api_version and example["kind"] == "WorkQueue"
    body = {k: v for k, v in example.items() if k != "metadata"}
    jsonschema.validate(body, definition.schema)  # the structural schema as JSON Schema
    assert definition.admit(example)["spec"] == {
        "parallelism": 4,
        "paused": False,
        "deletionPolicy": "Retain",
    }
    assert apply_defaults(definition.schema, {"spec": {}})["spec"] == {
        "parallelism": 1, "paused": False, "deletionPolicy": "Retain"}  # fmt: skip
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"spec": {"parallelism": -1}}, definition.schema)


def manager_args(values) -> list[str]:
    found, _ = containers(render(values))
    return found["manager"]["args"]


def test_off_renders_no_decider():
    docs = render(None)
    assert not by_kind(docs, "ScaledObject") and not by_kind(docs, "HorizontalPodAutoscaler")
    assert "--autoscale" not in manager_args(None)


def test_builtin_is_the_managers_autoscaler_alone():
    values = {"autoscaling": {"mode": "builtin", "minParallelism": 2, "maxParallelism": 8}}
    docs = render(values)
    assert not by_kind(docs, "ScaledObject") and not by_kind(docs, "HorizontalPodAutoscaler")
    args = manager_args(values)
    assert {"--autoscale", "--min-parallelism=2", "--max-parallelism=8"} <= set(args)
    from kube_workqueue.manager.cli import build_parser

    build_parser().parse_args([a.replace("$(POD_NAMESPACE)", "media") for a in args])


def test_keda_scales_the_workqueue_to_zero_on_the_backlog():
    values = {"autoscaling": {"mode": "keda", "minParallelism": 0, "maxParallelism": 20},
              "serviceMonitor": {"enabled": True}}  # fmt: skip
    docs = render(values)
    (scaled,) = by_kind(docs, "ScaledObject")
    assert scaled["apiVersion"] == "keda.sh/v1alpha1"
    assert scaled["spec"]["scaleTargetRef"] == {
        "apiVersion": "workqueue.dev/v1alpha1", "kind": "WorkQueue", "name": "thumbs"}  # fmt: skip
    assert scaled["spec"]["minReplicaCount"] == 0 and scaled["spec"]["maxReplicaCount"] == 20
    (trigger,) = scaled["spec"]["triggers"]
    assert trigger["type"] == "prometheus"
    assert 'state=~"pending|running"' in trigger["metadata"]["query"]
    assert 'namespace="media"' in trigger["metadata"]["query"]
    assert trigger["metadata"]["threshold"] == "1"
    assert set(trigger["metadata"]) == {
        "serverAddress",
        "query",
        "threshold",
        "activationThreshold",
    }
    assert "--autoscale" not in manager_args(values) and not by_kind(
        docs, "HorizontalPodAutoscaler"
    )


def test_hpa_targets_the_scale_subresource_and_is_valid():
    values = {"autoscaling": {"mode": "hpa", "minParallelism": 1, "maxParallelism": 6},
              "metrics": {"scrapeAnnotations": True}}  # fmt: skip
    docs = render(values)
    (deployment,) = by_kind(docs, "Deployment")
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true" and annotations["prometheus.io/port"]
    (hpa,) = by_kind(docs, "HorizontalPodAutoscaler")
    for version in VERSIONS:
        validate_strictly(hpa, version, strict=True)
    assert hpa["spec"]["scaleTargetRef"]["kind"] == "WorkQueue"
    assert hpa["spec"]["metrics"][0]["external"]["target"] == {
        "type": "AverageValue", "averageValue": "1"}  # fmt: skip
    assert "--autoscale" not in manager_args(values) and not by_kind(docs, "ScaledObject")


@pytest.mark.parametrize(
    "values",
    [
        {"autoscaling": {"mode": "sometimes"}},
        {"autoscaling": {"mode": "builtin", "minParallelism": 0}},
        {"autoscaling": {"mode": "hpa", "minParallelism": 0}},
        {"autoscaling": {"mode": "keda", "maxParallelism": 0}},
    ],
    ids=["unknown-mode", "builtin-at-zero", "hpa-at-zero", "no-room"],
)
def test_the_schema_refuses_deciders_that_cannot_work(values):
    assert lint(str(CHART), values, strict=True)["errors"]


def test_the_role_grants_the_workqueue_verbs():
    (role,) = by_kind(render(None), "Role")
    rules = {(g, r): set(rule["verbs"]) for rule in role["rules"] for g in rule["apiGroups"]
             for r in rule["resources"]}  # fmt: skip
    assert rules[("workqueue.dev", "workqueues")] == {"create", "get", "list", "patch", "watch"}
    assert rules[("workqueue.dev", "workqueues/status")] == {"patch"}
    assert rules[("workqueue.dev", "workqueues/scale")] == {"patch"}
