"""The operator against the API-server stand-in: the chart's CRD installed, a test kubelet
running the Jobs, a test deployment controller running the queues' ambassadors
(`tests.support.deployments`), the real `kubectl`, and `workqueue operator` as a real process."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.apiserver import ApiServer
from tests.support.deployments import DeploymentRunner
from tests.support.kubelet import QUICK_BACKOFF, Kubelet

ROOT = Path(__file__).resolve().parents[2]
CRD = ROOT / "charts/workqueue/crds/workqueues.workqueue.dev.yaml"
NS = "media"


def marking_worker(folder: Path) -> Path:
    """A worker that appends its item's data (one JSON line) to $MARKERS, then sleeps
    $SLEEP seconds: what ran, and how often, read from the workers' own marks."""
    script = folder / "marking-worker.sh"
    script.write_text(
        "#!/bin/sh\n"
        'data=$(cat "$WORK_ITEM_FILE")\n'
        'printf \'%s\\n\' "$data" >> "$MARKERS"\n'
        'sleep "${SLEEP:-0}"\n'
    )
    script.chmod(0o755)
    return script


def marks(path: Path) -> list[str]:
    """Each run's item, as canonical JSON (its data: the same item, the same text)."""
    if not path.exists():
        return []
    return [json.dumps(json.loads(line), sort_keys=True)
            for line in path.read_text().splitlines() if line]  # fmt: skip


class Operated:
    """A stand-in cluster with the operator's surroundings; `start_operator()` runs it."""

    def __init__(self, tmp_path: Path) -> None:
        self.server = ApiServer(history=20_000).start()
        self.server.store.install_crd(yaml.safe_load(CRD.read_text()))
        self.kubelet = Kubelet(self.server, backoff=QUICK_BACKOFF)
        self.deployments = DeploymentRunner(self.server)
        self.kubeconfig = self.server.write_kubeconfig(tmp_path / "kubeconfig")
        self.log = tmp_path / "operator.log"
        self.operator: subprocess.Popen | None = None
        self.worker = marking_worker(tmp_path)

    def start_operator(self, *extra: str) -> subprocess.Popen:
        proxy = self.server.url + "/api/v1/namespaces/{namespace}/services/{service}:{port}/proxy"
        with open(self.log, "ab") as log:  # the child holds its own descriptor
            self.operator = self._popen(proxy, extra, log)
        return self.operator

    def _popen(self, proxy: str, extra: tuple[str, ...], log) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-m", "kube_workqueue.manager.cli", "operator", "--namespace", NS,
             "--kubeconfig", self.kubeconfig, "--ambassador-url", proxy, "--kube-api-qps", "0",
             "--lease", f"{NS}/workqueue-operator",
             *extra],
            stdout=subprocess.DEVNULL, stderr=log,
        )  # fmt: skip

    def stop_operator(self) -> int:
        assert self.operator is not None
        self.operator.send_signal(signal.SIGTERM)
        code = self.operator.wait(60)
        self.operator = None
        return code

    def kubectl(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
        done = subprocess.run(["kubectl", "--kubeconfig", self.kubeconfig, *args], input=stdin,
                              capture_output=True, text=True, timeout=60)  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done

    def queue(self, name: str) -> dict | None:
        return self.server.store.objects.get(("workqueues", NS, name))

    def condition(self, name: str, kind: str) -> dict:
        for c in ((self.queue(name) or {}).get("status") or {}).get("conditions") or []:
            if c["type"] == kind:
                return c
        return {}

    def owned_by(self, uid: str) -> list[tuple[str, str]]:
        return [(r, n) for (r, _, n), o in list(self.server.store.objects.items())
                if any(ref.get("uid") == uid
                       for ref in o["metadata"].get("ownerReferences") or [])]  # fmt: skip

    def close(self) -> None:
        if self.operator is not None and self.operator.poll() is None:
            self.operator.kill()
            self.operator.wait(30)
        self.deployments.stop()
        self.server.stop()


@pytest.fixture
def operated(tmp_path):
    cluster = Operated(tmp_path)
    yield cluster
    cluster.close()
