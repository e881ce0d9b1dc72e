"""The chart as the chart tests read it: rendered by the real Helm engine (helm-python-sdk,
no binary) into its manifests, NOTES left out; the Kubernetes versions each manifest is
validated against (1.30 and the newest kubernetes-validate knows); and EVERYTHING, values that
turn every optional part on - what the tests render beside the defaults."""

from __future__ import annotations

from pathlib import Path

import kubernetes_validate
import yaml
from helm_python import Chart

CHART = Path(__file__).resolve().parents[2] / "charts" / "workqueue"
CRD_FILE = "workqueues.workqueue.dev.yaml"
VERSIONS = ["1.30.0", kubernetes_validate.latest_version()]

EVERYTHING = {
    "replicaCount": 3,
    "queue": "videos",
    "ambassador": {
        "suffixes": [".mp4", ".mov"],
        "recursive": True,
        "settleSeconds": 5,
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}},
        "service": {"enabled": True, "type": "ClusterIP", "port": 80},
    },
    "manager": {
        "parallelism": 8,
        "watch": False,
        "keepSucceeded": 100,
        "keepFailed": 50,
        "kubeApiQps": 10,
        "kubeApiBurst": 20,
        "batchSize": 8,
        "batchWait": "2s",
        "priorities": ["urgent/*=10", "* #odd.mov=-5"],
        "group": "^([^/]+)/",
        "limits": ["acme=2", "*=5"],
        "rates": ["acme=100/1m"],
        "fair": True,
        "weights": ["gold-*=3"],
        "resources": {"limits": {"cpu": "500m", "memory": "256Mi"}},
    },
    "worker": {
        "image": "registry.example/thumbnailer:2.0",
        "command": ["/usr/local/bin/thumbnail"],
        "args": ["--width", "320 px"],
        "env": {"OUTPUT_DIR": "/data/thumbnails"},
        "resources": {"requests": {"cpu": "250m", "memory": "128Mi"}},
        "backoffLimit": 2,
        "activeDeadlineSeconds": 900,
        "ttlSecondsAfterFinished": 60,
        "serviceAccountName": "thumbnailer",
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "tolerations": [
            {"key": "batch", "effect": "NoSchedule"},
            {"key": "gpu", "value": "yes", "effect": "NoExecute"},
        ],
        "failFastExitCodes": [2, 3],
        "jobLabels": {"team": "media"},
        "jobAnnotations": {"example.com/owner": "video-team"},
        "kueueQueue": "media-queue",
    },
    "volume": {
        "mountPath": "/data",
        "nfs": {"server": "10.0.0.5", "path": "/exports/videos", "size": "1Ti"},
    },
    "serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}},
    "nodeSelector": {"kubernetes.io/os": "linux"},
    "tolerations": [{"key": "infra", "operator": "Exists", "effect": "NoSchedule"}],
}


def render(values=None) -> list[dict]:
    with Chart.load(str(CHART)) as chart:
        out = chart.render(values=values, name="demo", namespace="media")
    docs = []
    for path, text in sorted(out.items()):
        if path.endswith("NOTES.txt"):
            continue
        docs += [d for d in yaml.safe_load_all(text) if d]
    return docs


def by_kind(docs, kind):
    return [d for d in docs if d["kind"] == kind]


def containers(docs):
    pod = by_kind(docs, "Deployment")[0]["spec"]["template"]["spec"]
    return {c["name"]: c for c in pod["containers"]}, pod
