"""The chart's `mode: operator`: the WorkQueue operator installed once - valid manifests, the
rules cluster-wide or in the listed namespaces only, the per-queue objects absent, the
operator's arguments accepted by the real CLI, and its pod locked down. (That its rules are
exactly the calls it makes is checked in tests/operator/test_operator.py, against the calls
the API-server stand-in recorded.)"""

from __future__ import annotations

import pytest
from helm_python import lint

from tests.support.kube_schemas import validate as validate_strictly

from .rendering import CHART, VERSIONS, by_kind, render

CLUSTER = {"mode": "operator"}
LISTED = {"mode": "operator", "operator": {"namespaces": ["media", "batch"], "workers": 8}}


@pytest.mark.parametrize("values", [CLUSTER, LISTED], ids=["cluster", "namespaces"])
def test_the_operator_mode_renders_valid_manifests_and_nothing_per_queue(values):
    assert lint(str(CHART), values, strict=True)["errors"] == []
    docs = render(values)
    for doc in docs:
        for version in VERSIONS:
            validate_strictly(doc, version, strict=True)
    (deployment,) = by_kind(docs, "Deployment")
    assert deployment["metadata"]["name"] == "demo-workqueue-operator"
    assert not by_kind(docs, "PersistentVolumeClaim") and not by_kind(docs, "Service")
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True


def test_every_namespace_is_a_cluster_role_and_listed_ones_are_roles_there():
    cluster = render(CLUSTER)
    assert [d["metadata"]["name"] for d in by_kind(cluster, "ClusterRole")] == [
        "demo-workqueue-operator"
    ]
    assert not by_kind(cluster, "Role")
    listed = render(LISTED)
    assert not by_kind(listed, "ClusterRole") and not by_kind(listed, "ClusterRoleBinding")
    queues = [r for r in by_kind(listed, "Role") if not r["metadata"]["name"].endswith("-lease")]
    assert sorted(r["metadata"]["namespace"] for r in queues) == ["batch", "media"]
    (lease,) = [r for r in by_kind(listed, "Role") if r["metadata"]["name"].endswith("-lease")]
    assert "namespace" not in lease["metadata"]  # the release's own
    assert lease["rules"] == [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                               "verbs": ["create", "get", "update"]}]  # fmt: skip
    for binding in by_kind(listed, "RoleBinding"):
        (subject,) = binding["subjects"]
        assert subject["namespace"] == "media" and subject["kind"] == "ServiceAccount"


@pytest.mark.parametrize("values", [CLUSTER, LISTED], ids=["cluster", "namespaces"])
def test_reading_nodes_is_one_cluster_rule_of_its_own_and_only_when_asked(values):
    """`operator.readNodes` (a WorkQueue's `spec.placement.nodeLabels`): list on nodes, in a
    ClusterRole of its own - whether the operator's other rules are cluster-wide or not."""
    asked = {**values, "operator": {**values.get("operator", {}), "readNodes": True}}
    docs = render(asked)
    (nodes,) = [r for r in by_kind(docs, "ClusterRole") if r["metadata"]["name"].endswith("-nodes")]
    assert nodes["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}]
    for doc in by_kind(docs, "ClusterRole") + by_kind(docs, "ClusterRoleBinding"):
        for version in VERSIONS:
            validate_strictly(doc, version, strict=True)
    binding = next(b for b in by_kind(docs, "ClusterRoleBinding")
                   if b["roleRef"]["name"] == nodes["metadata"]["name"])  # fmt: skip
    assert binding["subjects"][0]["kind"] == "ServiceAccount"
    assert not any(r["metadata"]["name"].endswith("-nodes")
                   for r in by_kind(render(values), "ClusterRole"))  # fmt: skip


@pytest.mark.parametrize("values", [CLUSTER, LISTED], ids=["cluster", "namespaces"])
def test_the_cli_accepts_the_operators_arguments(values):
    from kube_workqueue.manager.cli import build_parser

    (deployment,) = by_kind(render(values), "Deployment")
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    parsed = build_parser().parse_args([a.replace("$(POD_NAMESPACE)", "media") for a in args])
    assert parsed.lease == "media/demo-workqueue-operator"
    assert (
        parsed.subcommand == "operator" and parsed.image == "ghcr.io/kube-workqueue/workqueue:0.1.0"
    )
    if values is LISTED:
        assert parsed.namespaces == ["media", "batch"] and parsed.workers == 8
    else:
        assert parsed.all_namespaces and parsed.namespaces is None
