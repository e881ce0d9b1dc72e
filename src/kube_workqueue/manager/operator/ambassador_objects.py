"""A queue's own ambassador: the Deployment and Service the operator makes for a WorkQueue whose
source the ambassador serves (a bucket, a Redis key, a JetStream stream, a folder on a
PersistentVolumeClaim), both owned by the WorkQueue as their controller - deleting the queue
deletes them through the garbage collector.

Why a pod per queue and not a source in the operator's process: the source's credentials
(`source.credentialsSecret`, as the pod's environment; a gs:// queue's Secret is a key file,
`key.json`, mounted read-only and named by GOOGLE_APPLICATION_CREDENTIALS) and the volume's
mount stay in that pod; the operator reads neither. A cloud identity instead of a Secret
(`source.serviceAccountName`: IRSA, GKE Workload Identity, Azure workload identity - whose pod
label an azblob:// queue with no Secret gets) is that pod's too. One source's trouble (a slow
bucket listing, a million-record stream in memory) is that pod's, not every queue's. The pod is
the chart's ambassador container: the same image, arguments, probes and security context, one
worker process.

A NetworkPolicy beside them lets only the operator's pods (`app.kubernetes.io/component:
operator`, in any namespace) reach the ambassador's port; what the ambassador itself reaches (a
bucket, a Redis) is not restricted.

`ensure(api, queue_object, plan, settings)` creates the three, or replaces the Deployment's pod
template when the plan changed it (a Deployment rolls its pods on that); an object of the same
name that the WorkQueue does not control is left alone and reported (`Conflict`).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from ..backends.kubernetes.client.api import KubeApi, KubeError
from ..backends.kubernetes.manifests import objects as ko
from ..backends.kubernetes.parts import reference
from .queue_spec import (
    GCS_KEY_IN_SECRET,
    AmbassadorPlan,
    Settings,
    SpecProblem,
    ambassador_name,
)

TEMPLATE_HASH = "workqueue.dev/ambassador-template"
# not the queue label: what selects a queue's Jobs and worker pods must not find this pod
AMBASSADOR_OF = "workqueue.dev/ambassador-of"
GCS_KEY_FOLDER = "/var/run/secrets/workqueue/gcs"  # where the chart mounts it too
IMAGE_USER = 10001  # the workqueue image's own user (worker-images/workqueue/Dockerfile)


def controller_reference(obj: dict) -> dict:
    """`parts.reference` to `obj`, as its controller (the garbage collector waits on it)."""
    return {**reference(obj), "controller": True, "blockOwnerDeletion": True}


def labels(queue: str) -> dict[str, str]:
    return {**ko.standard_labels(queue, component="ambassador"), AMBASSADOR_OF: queue}


def deployment(queue: str, plan: AmbassadorPlan, settings: Settings, owner: dict) -> dict:
    container: dict[str, Any] = {
        "name": "ambassador",
        "image": settings.image,
        "args": [
            "ambassador",
            *plan.args,
            "--host=0.0.0.0",
            f"--port={settings.ambassador_port}",
            "--workers=1",
        ],  # fmt: skip
        "ports": [{"name": "items", "containerPort": settings.ambassador_port}],
        "readinessProbe": {"httpGet": {"path": "/readyz", "port": "items"}, "periodSeconds": 10},
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": "items"}, "periodSeconds": 20},
        "securityContext": {
            "runAsNonRoot": True,
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "resources": {
            "requests": {"cpu": "50m", "memory": "96Mi"},
            "limits": {"cpu": "1", "memory": "512Mi"},
        },  # fmt: skip
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
    }
    if plan.env:
        container["env"] = [{"name": k, "value": v} for k, v in sorted(plan.env.items())]
    if plan.credentials_secret:
        container["envFrom"] = [{"secretRef": {"name": plan.credentials_secret}}]
    volumes: list[dict] = [{"name": "tmp", "emptyDir": {}}]
    if plan.key_file_secret:  # read-only, to the ambassador's user alone
        key = {"key": GCS_KEY_IN_SECRET, "path": GCS_KEY_IN_SECRET}
        volumes.append(
            {
                "name": "gcs-key",
                "secret": {"secretName": plan.key_file_secret, "defaultMode": 0o440,
                           "items": [key]},
            }
        )  # fmt: skip
        container["volumeMounts"].append(
            {"name": "gcs-key", "mountPath": GCS_KEY_FOLDER, "readOnly": True}
        )
        key_path = f"{GCS_KEY_FOLDER}/{GCS_KEY_IN_SECRET}"
        container.setdefault("env", []).append(
            {"name": "GOOGLE_APPLICATION_CREDENTIALS", "value": key_path}
        )
    if plan.claim:
        claim = {"claimName": plan.claim, "readOnly": True}
        volumes.append({"name": "shared", "persistentVolumeClaim": claim})
        container["volumeMounts"].append(
            {"name": "shared", "mountPath": plan.mount_path, "readOnly": True}
        )
    pod_labels = labels(queue)
    if plan.azure_workload_identity:  # AKS's webhook gives the pod the identity's token
        pod_labels["azure.workload.identity/use"] = "true"
    template = {
        "metadata": {"labels": pod_labels},
        "spec": {
            **({"serviceAccountName": plan.service_account} if plan.service_account else {}),
            # (a cloud identity's token is projected by its webhook, not by this mount)
            "automountServiceAccountToken": False,
            "securityContext": {
                **ko.pod_security(None, run_as_user=IMAGE_USER),
                "runAsGroup": IMAGE_USER,
            },  # fmt: skip
            "containers": [container],
            "volumes": volumes,
        },
    }
    digest = hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()[:16]
    name = ambassador_name(queue)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "labels": labels(queue),
            "annotations": {TEMPLATE_HASH: digest},
            "ownerReferences": [owner],
        },  # fmt: skip
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {AMBASSADOR_OF: queue}},
            "template": template,
        },
    }


def service(queue: str, settings: Settings, owner: dict) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": ambassador_name(queue),
            "labels": labels(queue),
            "ownerReferences": [owner],
        },  # fmt: skip
        "spec": {
            "selector": {AMBASSADOR_OF: queue},
            "ports": [
                {"name": "items", "port": settings.ambassador_port, "targetPort": "items"}
            ],  # fmt: skip
        },
    }


def network_policy(queue: str, settings: Settings, owner: dict) -> dict:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": ambassador_name(queue), "labels": labels(queue),
                     "ownerReferences": [owner]},  # fmt: skip
        "spec": {
            "podSelector": {"matchLabels": {AMBASSADOR_OF: queue}},
            "policyTypes": ["Ingress"],
            "ingress": [{
                "from": [{"namespaceSelector": {},
                          "podSelector": {"matchLabels": {
                              "app.kubernetes.io/component": "operator"}}}],
                "ports": [{"protocol": "TCP", "port": settings.ambassador_port}],
            }],
        },
    }  # fmt: skip


def _controlled_by(obj: dict, owner: dict) -> bool:
    refs = obj["metadata"].get("ownerReferences") or []
    return any(r.get("uid") == owner["uid"] and r.get("controller") for r in refs)


def ensure(api: KubeApi, queue_object: dict, plan: AmbassadorPlan, settings: Settings) -> None:
    """The queue's ambassador Deployment and Service, as `plan` says (see the module)."""
    queue = queue_object["metadata"]["name"]
    owner = controller_reference(queue_object)
    wanted = {"deployments": deployment(queue, plan, settings, owner),
              "services": service(queue, settings, owner),
              "networkpolicies": network_policy(queue, settings, owner)}  # fmt: skip
    for kind, body in wanted.items():
        name = body["metadata"]["name"]
        current = api.find(kind, name)
        if current is None:
            try:
                api.create(kind, body)
            except KubeError as exc:
                if exc.reason != "AlreadyExists":
                    raise
            continue
        if not _controlled_by(current, owner):
            raise SpecProblem(
                "Conflict", f"{kind[:-1]} {name} exists and this WorkQueue does not own it"
            )
        annotations = current["metadata"].get("annotations") or {}
        if (
            kind == "deployments"
            and annotations.get(TEMPLATE_HASH) != (body["metadata"]["annotations"][TEMPLATE_HASH])
        ):
            api.patch(kind, name, {"metadata": {"annotations": body["metadata"]["annotations"]},
                                   "spec": {"template": body["spec"]["template"]}})  # fmt: skip
