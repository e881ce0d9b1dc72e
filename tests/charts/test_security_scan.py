"""The chart as a security review reads it: checkov (the scanner platform teams run on every
chart) on the rendered chart - with the defaults and with every optional object on - and on
the Job and ConfigMap the manager creates from the chart's own arguments. Nothing may fail
but the findings that are the user's own choice at install, which a chart cannot make for
them: the namespace (`helm install -n`), image digests and the pull policy.

checkov lives in its own environment (`make test` makes `.venv-checkov`): it pins libraries
of its own that the project's environment need not share."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import yaml

from .rendering import EVERYTHING, containers, render

REPO = Path(__file__).resolve().parents[2]
USERS_CHOICE = {
    "CKV_K8S_21": "the namespace: set by `helm install -n`, not by the chart",
    "CKV_K8S_43": "image digests: the user pins the images they run",
    "CKV_K8S_15": "the pull policy: Always suits mutable tags, IfNotPresent pinned ones",
}
ALL_ON = {
    **EVERYTHING,
    "grafanaDashboard": {"enabled": True},
    "prometheusRule": {"enabled": True},
    "networkPolicy": {"enabled": True, "itemsFrom": [{"podSelector": {}}]},
}


def checkov_binary() -> str:
    found = os.environ.get("CHECKOV") or shutil.which("checkov")
    local = REPO / ".venv-checkov" / "bin" / "checkov"
    binary = found or (str(local) if local.exists() else None)
    assert binary, "checkov is missing: run `make test` (it installs checkov in .venv-checkov)"
    return binary


def scan(sets: dict[str, list[dict]], tmp_path: Path) -> dict[str, list[dict]]:
    """checkov's failed checks on each set of documents, every one of them (none skipped by
    checkov), by the set's name. One checkov run for all of them: its start-up is ten seconds
    of a core, paid once, not once a set."""
    for name, docs in sets.items():
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump_all(docs))
    done = subprocess.run(
        [checkov_binary(), "-d", str(tmp_path), "--framework", "kubernetes", "--skip-download",
         "--quiet", "--output", "json"],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "BC_SKIP_MAPPING": "TRUE", "CHECKOV_RUN_SCA_PACKAGE_SCAN_V2": "false"},
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stderr[-3000:]
    report = json.loads(done.stdout)
    reports = report if isinstance(report, list) else [report]
    failed: dict[str, list[dict]] = {name: [] for name in sets}
    scanned = set()
    for one in reports:
        results = one.get("results", {})
        for check in results.get("passed_checks", []) + results.get("failed_checks", []):
            scanned.add(Path(check["file_path"]).stem)
        for check in results.get("failed_checks", []):
            failed[Path(check["file_path"]).stem].append(check)
    assert scanned == set(sets), f"checkov read {sorted(scanned)} of {sorted(sets)}"
    return failed


def users_choices_only(failed: list[dict]) -> list[str]:
    """What checkov finds that is not the user's own choice at install."""
    left = sorted({(f["check_id"], f["check_name"], f["resource"]) for f in failed
                   if f["check_id"] not in USERS_CHOICE})  # fmt: skip
    return [f"{c} {n} ({r})" for c, n, r in left]


def manager_creates(values) -> list[dict]:
    """The Job and ConfigMap a manager started with the chart's own arguments creates, and the
    NetworkPolicy deployed with them."""
    from kube_workqueue.manager.backends.kubernetes import KubeOptions
    from kube_workqueue.manager.backends.kubernetes.manifests import objects as ko
    from kube_workqueue.manager.cli import build_parser
    from kube_workqueue.manager.declared import from_words

    chart = render(values)
    found, _ = containers(chart)
    args = [a.replace("$(POD_NAMESPACE)", "media") for a in found["manager"]["args"]]
    options = from_words(KubeOptions, vars(build_parser().parse_args(args)))
    data = {"name": "a video.mp4", "path": "/data/a video.mp4", "size": 10}
    return [
        ko.job(options.queue, "media", "a video.mp4", 1, options.pod()),
        ko.config_map(options.queue, "media", "a video.mp4", data),
        *[d for d in chart if d["kind"] == "NetworkPolicy"],  # deployed with them
    ]


def operator_creates() -> list[dict]:
    """The ambassador Deployment and Service the operator makes for a folder queue."""
    from kube_workqueue.manager.operator import ambassador_objects
    from kube_workqueue.manager.operator.queue_spec import Settings, plan

    settings = Settings(image="ghcr.io/kube-workqueue/workqueue:0.1.0")
    queue = {"metadata": {"name": "thumbs", "namespace": "media", "uid": "u-1"},
             "spec": {"source": {"volume": {"claimName": "media"}, "credentialsSecret": "c"},
                      "worker": {"image": "w:1"}}}  # fmt: skip
    owner = {"apiVersion": "workqueue.dev/v1beta1", "kind": "WorkQueue", "name": "thumbs",
             "uid": "u-1", "controller": True, "blockOwnerDeletion": True}  # fmt: skip
    ambassador = plan(queue, settings).ambassador
    return [ambassador_objects.deployment("thumbs", ambassador, settings, owner),
            ambassador_objects.service("thumbs", settings, owner),
            ambassador_objects.network_policy("thumbs", settings, owner)]  # fmt: skip


def test_checkov_finds_nothing_in_the_chart_or_what_the_manager_creates_but_the_users_choices(
    tmp_path,
):
    sets = {
        "chart-defaults": render(None),
        "chart-everything-on": render(ALL_ON),
        "manager-defaults": manager_creates(None),
        "manager-everything": manager_creates(EVERYTHING),
        "chart-operator": render({"mode": "operator"}),
        "chart-operator-namespaces": render(
            {"mode": "operator", "operator": {"namespaces": ["media"]}}
        ),
        "operator-creates": operator_creates(),
    }
    for name in ("chart-defaults", "chart-everything-on"):  # (not operator mode: no item flows)
        assert "NetworkPolicy" in {d["kind"] for d in sets[name]}
    kinds = {d["kind"] for d in sets["chart-everything-on"]}
    assert {"PrometheusRule", "ServiceMonitor", "Service", "ConfigMap"} <= kinds
    found = {name: users_choices_only(failed) for name, failed in scan(sets, tmp_path).items()}
    # a source's credentials reach the queue's ambassador as its environment: the clients it
    # uses (boto3, redis-py, nats-py) read them there, and the user names the Secret
    found["operator-creates"] = [f for f in found["operator-creates"]
                                 if not f.startswith("CKV_K8S_35 ")]  # fmt: skip
    assert not any(found.values()), "checkov finds:\n" + "\n".join(
        f"{name}: {finding}" for name, findings in found.items() for finding in findings
    )


def test_the_manager_alone_mounts_the_api_token_and_reads_the_dashboard_token_from_a_file():
    found, pod = containers(render(None))
    assert pod["automountServiceAccountToken"] is False
    token_mounts = {
        name: [m for m in c.get("volumeMounts", []) if m["name"] == "kube-api-access"]
        for name, c in found.items()
    }
    assert token_mounts["manager"] and not token_mounts["ambassador"]
    assert (
        token_mounts["manager"][0]["mountPath"] == "/var/run/secrets/kubernetes.io/serviceaccount"
    )
    env = {e["name"] for c in found.values() for e in c.get("env", [])}
    assert "WORKQUEUE_UI_TOKEN" not in env
    assert "--ui-token-file=/etc/workqueue/ui/token" in found["manager"]["args"]
    for c in found.values():
        assert c["readinessProbe"] and c["livenessProbe"]
        assert c["resources"]["limits"]["cpu"] and c["resources"]["limits"]["memory"]
