"""The Helm chart, rendered by the real Helm engine (helm-python-sdk, no binary): lint-clean,
every manifest valid under kubernetes-validate (strict) for 1.30 and the newest version, the
containers' arguments accepted by the real CLI, the pods locked down, and the RBAC exactly the
calls the manager makes - compared with a run recorded by the API-server stand-in."""

from __future__ import annotations

import pytest
import yaml
from helm_python import Chart, lint

from tests.support.folders import make_items
from tests.support.kube_schemas import validate as validate_strictly

from ..e2e.conftest import workqueue
from .rendering import CHART, CRD_FILE, EVERYTHING, VERSIONS, by_kind, containers, render


def test_lint_reports_no_errors():
    for values in (None, EVERYTHING):
        result = lint(str(CHART), values, strict=True)
        assert result["errors"] == [], result


@pytest.mark.parametrize("values", [None, EVERYTHING], ids=["defaults", "everything"])
def test_every_manifest_is_valid(values):
    docs = render(values)
    kinds = {d["kind"] for d in docs}
    assert {"Deployment", "ServiceAccount", "Role", "RoleBinding", "PersistentVolumeClaim"} <= kinds
    for doc in docs:
        if doc["kind"] == "ServiceMonitor":  # a CRD: no official schema to check against
            assert doc["apiVersion"] == "monitoring.coreos.com/v1"
            continue
        for version in VERSIONS:
            validate_strictly(doc, version, strict=True)
    if values is EVERYTHING:
        assert {"Service", "PersistentVolume", "ServiceMonitor"} <= kinds


@pytest.mark.parametrize("values", [None, EVERYTHING], ids=["defaults", "everything"])
def test_the_cli_accepts_the_rendered_arguments(values):
    from kube_workqueue.manager.cli import build_parser

    parser = build_parser()
    found, _ = containers(render(values))
    for name in ("ambassador", "manager"):
        args = [a.replace("$(POD_NAMESPACE)", "media") for a in found[name]["args"]]
        parsed = parser.parse_args(args)  # raises SystemExit on anything it does not know
        assert parsed.subcommand == name
    manager = parser.parse_args(
        [a.replace("$(POD_NAMESPACE)", "media") for a in found["manager"]["args"]]
    )
    from kube_workqueue.manager.backends.kubernetes import KubeOptions
    from kube_workqueue.manager.declared import from_words

    options = from_words(KubeOptions, vars(manager))  # the typed options the manager gets
    assert manager.backend == "kubernetes" and options.leader_elect
    if values is EVERYTHING:
        assert options.args == ["--width", "320 px"]
        assert options.pvc == "demo-workqueue-data" and options.volume_writable
        assert (options.batch_size, options.batch_wait) == (8, 2.0)
        assert manager.priorities == [("urgent/*", 10), ("* #odd.mov", -5)]
        assert manager.group.pattern == "^([^/]+)/" and manager.fair
        assert manager.limits == [("acme", 2), ("*", 5)]
        assert manager.rates == [("acme", (100, 60.0))] and manager.weights == [("gold-*", 3.0)]
        assert options.tolerations == [
            {"key": "batch", "effect": "NoSchedule", "operator": "Exists"},
            {"key": "gpu", "effect": "NoExecute", "operator": "Equal", "value": "yes"},
        ]


@pytest.mark.parametrize("values", [None, EVERYTHING], ids=["defaults", "everything"])
def test_pods_are_locked_down_and_rbac_is_namespaced(values):
    docs = render(values)
    found, pod = containers(docs)
    assert pod["securityContext"]["runAsNonRoot"] is True
    for container in found.values():
        sc = container["securityContext"]
        assert sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"] is True
        assert sc["capabilities"]["drop"] == ["ALL"]
    assert not by_kind(docs, "ClusterRole") and not by_kind(docs, "ClusterRoleBinding")
    shared = [m for m in found["ambassador"]["volumeMounts"] if m["name"] == "shared"]
    assert shared and shared[0]["readOnly"] is True  # the ambassador never writes


def test_notes_tell_how_to_drop_query_and_watch():
    with Chart.load(str(CHART)) as chart:
        notes = chart.render(name="demo", namespace="media")["workqueue/templates/NOTES.txt"]
    assert "Drop files" in notes and "/api/v1/items" in notes
    assert "get jobs -l workqueue.dev/queue=thumbs" in notes


def test_rbac_is_exactly_what_a_recorded_run_calls(
    tmp_path, ambassador_server, marker_worker, apiserver, cluster
):
    """Record a run that takes every path - leader election, dispatch, a failure retried,
    completions, history cleanup, an orphaned ConfigMap removed, a stuck pod read afresh and
    its item failed, the WorkQueue followed (one made without the label, labelled) and its
    status written - and compare. The paths one run cannot also take are recorded by the
    tests named in OTHER_PATHS."""
    from kube_workqueue.manager.backends.kubernetes.manifests import objects as ko

    apiserver.store.install_crd(yaml.safe_load((CHART / "crds" / CRD_FILE).read_text()))
    apiserver.store.create("workqueue.dev", "workqueues", "media", {
        "metadata": {"name": "thumbs"}, "spec": {"parallelism": 1}})  # fmt: skip
    make_items(tmp_path / "videos", ["a.mp4", "b.mp4", "will-fail.mp4", "stuck.mp4"])
    cluster.kubelet.stuck = {"stuck.mp4": "ImagePullBackOff"}  # read afresh, then failed
    server = ambassador_server(tmp_path / "videos")
    apiserver.store.create(
        "", "configmaps", "media", ko.config_map("thumbs", "media", "left-over.mp4", {})
    )
    apiserver.store.create("apps", "deployments", "media", {"metadata": {"name": "demo-wq"}})
    r = workqueue(
        *cluster.args(
            server.url,
            marker_worker,
            "--once",
            "--owner-deployment",
            "demo-wq",
            "--leader-elect",
            "--keep-succeeded",
            "0",
            "--max-attempts",
            "2",
            "--retry-backoff",
            "0.05",
            "--orphan-age",
            "0",
            "--lease-duration",
            "2",
            "--renew-deadline",
            "1.5",
            "--retry-period",
            "0.1",
            "--stuck-timeout",
            "1s",
        )
    )
    assert r.returncode == 1, r.stderr
    called = {
        (resource.split("/")[-1] + (f"/{sub}" if sub else ""), verb)
        for verb, resource, sub in apiserver.verbs_seen()
    }
    role = by_kind(render(), "Role")[0]
    granted = {
        (res, verb) for rule in role["rules"] for res in rule["resources"] for verb in rule["verbs"]
    }
    assert granted == called | OTHER_PATHS, (granted - called - OTHER_PATHS, called - granted)


# Calls of the paths a run with an unlabelled WorkQueue does not take, each made in a recorded
# run of tests/manager/backends/kubernetes/test_workqueue_resource.py: the control ConfigMap is
# watched where the CRD is not installed; the manager creates a WorkQueue when there is none;
# the built-in autoscaler sets its scale.
OTHER_PATHS = {("configmaps", "watch"), ("workqueues", "create"), ("workqueues/scale", "patch")}


def test_the_example_values_file_renders_valid_manifests():
    values = yaml.safe_load(
        (CHART.parents[1] / "examples" / "thumbnailer" / "values-kubernetes.yaml").read_text()
    )
    docs = render(values)
    for doc in docs:
        for version in VERSIONS:
            validate_strictly(doc, version, strict=True)
    found, _ = containers(docs)
    assert "--env=OUTPUT_DIR=/data/thumbnails" in found["manager"]["args"]


def test_values_with_quotes_and_yaml_characters_reach_the_manager_exactly():
    from kube_workqueue.manager.backends.kubernetes import KubeOptions
    from kube_workqueue.manager.cli import build_parser
    from kube_workqueue.manager.declared import from_words

    given = {
        "worker": {
            "image": "registry.example/thumbnailer:2.0",
            "command": ["/bin/sh", "-c", "echo 'it''s' \"$X\" && exit 0"],
            "args": ["it's", 'a "quoted" word', "$(HOME)", "x: y # z", "", "back\\slash"],
            "env": {"MSG": "it's: #1 {not: yaml}", "EMPTY": ""},
            "resources": {
                "requests": {"cpu": "250m", "memory": "128Mi"},
                "limits": {"cpu": "2", "memory": "1Gi"},
            },
            "jobAnnotations": {"example.com/note": "it's 'quoted': yes"},
            "fsGroup": 2000,
            "runAsUser": 2000,
        }
    }
    found, _ = containers(render(given))
    args = [a.replace("$(POD_NAMESPACE)", "media") for a in found["manager"]["args"]]
    options = from_words(KubeOptions, vars(build_parser().parse_args(args)))
    worker = given["worker"]
    assert options.command == worker["command"] and options.args == worker["args"]
    assert options.env == worker["env"]
    assert options.job_annotations == worker["jobAnnotations"]
    pod = options.pod()
    assert pod.resources == worker["resources"]  # limits kept, requests not copied into them
    assert pod.fs_group == 2000 and pod.run_as_user == 2000
    # Helm merges values with the chart's defaults: null takes a default out
    requests_only = {
        "worker": {
            **worker,
            "resources": {"requests": {"cpu": "1", "memory": None}, "limits": None},
        }
    }
    found, _ = containers(render(requests_only))
    args = [a.replace("$(POD_NAMESPACE)", "media") for a in found["manager"]["args"]]
    pod = from_words(KubeOptions, vars(build_parser().parse_args(args))).pod()
    assert pod.resources == {"requests": {"cpu": "1"}}  # a request is no cap


def test_worker_pods_get_the_fsgroup_that_makes_a_new_volume_writable():
    from kube_workqueue.manager.backends.kubernetes.manifests import objects as ko

    pod = ko.PodOptions(image="w:1", pvc="data", fs_group=10001, run_as_user=10001)
    spec = ko.job("q", "media", "a.mp4", 1, pod)["spec"]["template"]["spec"]
    assert spec["securityContext"]["fsGroup"] == 10001
    assert spec["securityContext"]["fsGroupChangePolicy"] == "OnRootMismatch"
    assert spec["securityContext"]["runAsUser"] == 10001
    defaults = containers(render(None))[0]["manager"]["args"]
    assert "--fs-group=10001" in defaults and "--run-as-user=10001" in defaults


@pytest.mark.parametrize("kind", ["s3", "redis"])
def test_a_source_that_is_not_a_folder_claims_and_mounts_no_volume(kind):
    source = {"type": kind, "s3": {"bucket": "media-in"}, "redis": {"set": "todo"}}
    docs = render({"source": source})
    assert not by_kind(docs, "PersistentVolumeClaim") and not by_kind(docs, "PersistentVolume")
    found, pod = containers(docs)
    assert "shared" not in {v["name"] for v in pod["volumes"]}
    assert not [a for a in found["manager"]["args"] if a.startswith(("--pvc", "--volume"))]
    scratch = render({"source": source, "volume": {"enabled": True}})  # asked for: workers get it
    assert by_kind(scratch, "PersistentVolumeClaim")
    found, pod = containers(scratch)
    assert any(a.startswith("--pvc=") for a in found["manager"]["args"])
    assert "shared" not in {m["name"] for m in found["ambassador"]["volumeMounts"]}


@pytest.mark.parametrize(
    ("values", "says"),
    [
        ({"volume": {"enabled": False}}, "no volume is claimed"),
        ({"autoscaling": {"mode": "keda", "minParallelism": 0}}, "nothing would collect it"),
        ({"autoscaling": {"mode": "hpa"}}, "serviceMonitor.enabled=true"),
        ({"manager": {"batchSize": 500}}, "manager.batchSize 500 is larger than"),
        (
            {"manager": {"batchSize": 2, "sharedLedger": {"secret": "ledger"}}},
            "batchSize above 1 is not available with a shared ledger",
        ),
    ],
    ids=[
        "folder-without-volume",
        "keda-without-metrics",
        "hpa-without-metrics",
        "batch-too-big",
        "batches-on-a-shared-ledger",
    ],
)
def test_a_promise_that_would_not_hold_fails_to_render_saying_what_to_set(values, says):
    from helm_python.errors import HelmRenderError

    with pytest.raises(HelmRenderError) as refused:
        render(values)
    assert says in str(refused.value)


def test_placement_reaches_the_manager_as_its_flags_and_needs_a_shared_ledger():
    from helm_python.errors import HelmRenderError

    from kube_workqueue.manager.backends.kubernetes import KubeOptions
    from kube_workqueue.manager.cli import build_parser
    from kube_workqueue.manager.declared import from_words

    placement = {"offers": ["gpu=a100"], "needs": ["render/*=gpu,spot!=true"],
                 "prefers": "region=eu", "spillAfter": "90s", "needsFromData": True}  # fmt: skip
    values = {"placement": placement, "manager": {"sharedLedger": {"secret": "ledger"}}}
    found, _ = containers(render(values))
    args = [a.replace("$(POD_NAMESPACE)", "media") for a in found["manager"]["args"]]
    args.append("--ledger=postgresql://wq@db/queue")  # (the pod's WORKQUEUE_LEDGER)
    options = from_words(KubeOptions, vars(build_parser().parse_args(args)))
    assert options.offers == [("gpu", "a100")] and options.spill_after == 90.0
    assert [need.text for _, need in options.needs] == ["gpu,spot!=true"]
    assert options.prefers.text == "region=eu" and options.needs_from_data is True
    with pytest.raises(HelmRenderError, match="set manager.sharedLedger.secret"):
        render({"placement": placement})
    with pytest.raises(HelmRenderError, match="set manager.sharedLedger.secret"):
        render({"placement": {"needsFromData": True}})


def test_node_labels_reach_the_manager_with_the_one_cluster_wide_rule_it_needs():
    """`placement.nodeLabels`: the manager's `--offers-node-label`s, and the one cluster-wide
    permission it takes for them - list nodes, nothing else, bound to the manager's service
    account, named with the namespace (a ClusterRole's name is the cluster's)."""
    from helm_python.errors import HelmRenderError

    from kube_workqueue.manager.backends.kubernetes import KubeOptions
    from kube_workqueue.manager.cli import build_parser
    from kube_workqueue.manager.declared import from_words

    placement = {"nodeLabels": ["nvidia.com/gpu.product", "topology.kubernetes.io/region"]}
    values = {"placement": placement, "manager": {"sharedLedger": {"secret": "ledger"}}}
    docs = render(values)
    for doc in by_kind(docs, "ClusterRole") + by_kind(docs, "ClusterRoleBinding"):
        for version in VERSIONS:
            validate_strictly(doc, version, strict=True)
    found, pod = containers(docs)
    args = [a.replace("$(POD_NAMESPACE)", "media") for a in found["manager"]["args"]]
    args.append("--ledger=postgresql://wq@db/queue")
    options = from_words(KubeOptions, vars(build_parser().parse_args(args)))
    assert options.offers_node_labels == placement["nodeLabels"]
    (role,) = by_kind(docs, "ClusterRole")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}]
    assert role["metadata"]["name"].startswith("media-")
    (binding,) = by_kind(docs, "ClusterRoleBinding")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": pod["serviceAccountName"],
                                    "namespace": "media"}]  # fmt: skip
    with pytest.raises(HelmRenderError, match="set manager.sharedLedger.secret"):
        render({"placement": placement})


def test_batches_as_big_as_the_autoscaler_may_go_render():
    render({"manager": {"batchSize": 20, "parallelism": 2},
            "autoscaling": {"mode": "builtin", "maxParallelism": 20}})  # fmt: skip


def test_a_shared_ledger_comes_from_a_secret_and_never_reaches_the_arguments(monkeypatch):
    from kube_workqueue.manager.backends.kubernetes import KubeOptions
    from kube_workqueue.manager.cli import build_parser
    from kube_workqueue.manager.cli.environment import variable
    from kube_workqueue.manager.declared import from_words

    docs = render({"manager": {"sharedLedger": {"secret": "queue-ledger", "lease": "3m"}}})
    for doc in docs:
        if doc["kind"] != "ServiceMonitor":
            validate_strictly(doc, VERSIONS[-1], strict=True)
    found, _ = containers(docs)
    manager = found["manager"]
    (entry,) = [e for e in manager["env"] if e["name"] == variable("--ledger")]
    assert entry["valueFrom"]["secretKeyRef"] == {"name": "queue-ledger", "key": "url"}
    assert not any("postgresql" in a or a.startswith("--ledger") for a in manager["args"])
    parsed = build_parser().parse_args(
        [a.replace("$(POD_NAMESPACE)", "media") for a in manager["args"]]
    )
    words = {**vars(parsed), "declared_ledger": "postgresql://wq@db/queue"}  # the variable
    options = from_words(KubeOptions, words)
    assert (options.ledger, options.lease) == ("postgresql://wq@db/queue", 180.0)
    plain, _ = containers(render())
    assert not any(e["name"] == variable("--ledger") for e in plain["manager"]["env"])
