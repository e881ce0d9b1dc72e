"""The real kubectl against the stand-in serving the chart's CRD: discovery, `kubectl get` with
the CRD's printer columns (a server-side Table), the short name, and `kubectl scale` through the
scale subresource - the commands docs/cluster.md shows. Skipped where kubectl is not installed."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import yaml

CRD = Path(__file__).resolve().parents[2] / "charts/workqueue/crds/workqueues.workqueue.dev.yaml"


def test_kubectl_is_installed():
    assert shutil.which("kubectl"), "kubectl is missing: make test installs kubernetes-client"


def kubectl(kubeconfig, *args) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["kubectl", "--kubeconfig", str(kubeconfig), "-n", "media", *args],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_kubectl_gets_and_scales_a_workqueue(apiserver, tmp_path):
    apiserver.store.install_crd(yaml.safe_load(CRD.read_text()))
    apiserver.store.create("workqueue.dev", "workqueues", "media", {
        "metadata": {"name": "thumbs"}, "spec": {"parallelism": 2}})  # fmt: skip
    status = {
        "replicas": 2,
        "counts": {"pending": 5, "running": 2, "succeeded": 1, "failed": 0},
        "forecast": {"verdict": "stable"},
        "conditions": [
            {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}
        ],
    }
    apiserver.store.patch(
        "workqueues", "media", "thumbs", {"status": status}, "merge-patch", status_only=True
    )
    config = apiserver.write_kubeconfig(tmp_path / "kubeconfig")
    listed = kubectl(config, "get", "workqueues")
    assert listed.returncode == 0, listed.stderr
    header, row = listed.stdout.splitlines()
    assert header.split() == ["NAME", "READY", "PARALLELISM", "PENDING", "RUNNING", "SUCCEEDED",
                              "FAILED", "VERDICT", "AGE"]  # fmt: skip
    assert row.split()[:8] == ["thumbs", "True", "2", "5", "2", "1", "0", "stable"]
    scaled = kubectl(config, "scale", "workqueue/thumbs", "--replicas", "0")
    assert scaled.returncode == 0, scaled.stderr
    assert scaled.stdout.strip() == "workqueue.workqueue.dev/thumbs scaled"
    assert apiserver.store.get("workqueues", "media", "thumbs")["spec"]["parallelism"] == 0
    short = kubectl(config, "get", "wq", "thumbs", "-o", "jsonpath={.spec.parallelism}")
    assert short.returncode == 0 and short.stdout == "0", short.stderr
