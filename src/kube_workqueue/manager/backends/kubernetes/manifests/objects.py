"""What the Kubernetes backend creates for one item: its names, labels, ConfigMap and Job.

Pure data - no API calls, no `kubernetes` import - so every manifest can be checked against the
official schemas (tests/manager/backends/kubernetes/test_objects.py, kubernetes-validate,
strict) and two managers, or one restarted, always compute the same objects.

Names: `<queue>-<item slug>-<hash>`, a DNS-1123 label of at most 63
characters for any item name (spaces, unicode, 250 characters): the slug keeps it readable, the
hash - of the queue, the full name and the item's version when the source gives one - keeps it
unique. The API server refuses a second object with the same name (409 AlreadyExists), which is
what makes an item run once per version even when several managers race for it; a new version
(new bytes, `--on-change rerun`) gets a Job of its own beside the old one's. The ConfigMap
shares its Job's name.

Labels carry the queue and the item's hash - of the queue and name only, so a label selector
finds every version's objects; the annotations `workqueue.dev/item` and `workqueue.dev/version`
carry the full item name and its version, which labels cannot hold.

The pod is locked down by default: non-root, no privilege escalation, read-only root file
system, every capability dropped, the RuntimeDefault seccomp profile, and no service-account
token (a worker has no business calling the API). The item's data is the read-only file
`/var/run/workqueue/item.json`, named by `WORK_ITEM_FILE`.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
import time
from dataclasses import dataclass, field
from typing import Any

from .pod_patch import merge

GROUP = "workqueue.dev"
QUEUE_LABEL = f"{GROUP}/queue"
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
ITEM_HASH_LABEL = f"{GROUP}/item-hash"
ITEM_ANNOTATION = f"{GROUP}/item"
ATTEMPT_ANNOTATION = f"{GROUP}/attempt"
VERSION_ANNOTATION = f"{GROUP}/version"
RECORD_FINALIZER = f"{GROUP}/record"
MANAGED_BY = {"app.kubernetes.io/managed-by": "workqueue"}


def standard_labels(instance: str, component: str = "worker") -> dict[str, str]:
    """The labels Helm's conventions (and dashboards, cost tools, `kubectl -l`) select on:
    https://helm.sh/docs/chart_best_practices/labels/ - on every Job and pod the manager
    makes."""
    return {
        "app.kubernetes.io/name": "workqueue",
        "app.kubernetes.io/instance": instance,
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/part-of": "workqueue",
        **MANAGED_BY,
    }


ITEM_MOUNT_DIR = "/var/run/workqueue"
ITEM_FILE_KEY = "item.json"
MAX_NAME = 63
HASH_CHARS = 10
# A ConfigMap (the whole object) may hold at most 1 MiB; leave room for its metadata.
MAX_ITEM_BYTES = 1024 * 1024 - 16 * 1024

_LABEL_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


class ItemTooLarge(ValueError):
    """The item's data does not fit in a ConfigMap."""


class InvalidQueueName(ValueError):
    """A queue name must be a DNS-1123 label short enough to prefix object names."""


def check_queue_name(queue: str) -> str:
    if len(queue) > 30 or not _LABEL_RE.match(queue):
        raise InvalidQueueName(
            f"queue name {queue!r} must be lower-case letters, digits and '-', at most 30 "
            "characters, starting and ending with a letter or digit"
        )
    return queue


def item_hash(queue: str, item: str, chars: int = 16) -> str:
    raw = f"{queue}\0{item}".encode("utf-8", "surrogateescape")
    return hashlib.sha256(raw).hexdigest()[:chars]


def slug(text: str) -> str:
    lowered = text.lower()
    return re.sub(r"[^a-z0-9]+", "-", lowered).strip("-")


def object_name(queue: str, item: str, version: str | None = None) -> str:
    """The Job's (and its ConfigMap's) name for `item` at `version` in `queue` (a source
    without versions: None)."""
    keyed = item if version is None else f"{item}\0{version}"
    suffix = item_hash(queue, keyed, HASH_CHARS)
    room = MAX_NAME - len(queue) - len(suffix) - 2
    item_part = slug(item)[:room].strip("-") or "item"
    return f"{queue}-{item_part}-{suffix}"


def labels(queue: str, item: str) -> dict[str, str]:
    return {**MANAGED_BY, QUEUE_LABEL: queue, ITEM_HASH_LABEL: item_hash(queue, item)}


def item_selector(queue: str, item: str) -> str:
    """Every version's objects of one item."""
    return f"{QUEUE_LABEL}={queue},{ITEM_HASH_LABEL}={item_hash(queue, item)}"


def job_version(job: dict) -> str | None:
    return (job["metadata"].get("annotations") or {}).get(VERSION_ANNOTATION)


def job_attempt(job: dict) -> int:
    """The attempt a one-item Job runs (1 when its annotation does not say)."""
    return int((job["metadata"].get("annotations") or {}).get(ATTEMPT_ANNOTATION) or 1)


def newest(jobs: list[dict]) -> dict | None:
    """The latest of one item's Jobs: created last (attempt breaks a tie of seconds)."""

    def key(j: dict):
        meta = j["metadata"]
        attempt = (meta.get("annotations") or {}).get(ATTEMPT_ANNOTATION) or "0"
        return (meta.get("creationTimestamp") or "", int(attempt) if attempt.isdigit() else 0)

    return max(jobs, key=key, default=None)


def current_job(jobs: list[dict], version: str | None) -> dict | None:
    """Which of one item's Jobs speaks for it now: the newest of `version` when the version
    wanted is known (a re-run asked for a new version has none yet: None), else the newest.
    Older versions' Jobs are history."""
    if version is not None:
        return newest([j for j in jobs if job_version(j) == version])
    return newest(jobs)


def fail_fast_code(job: dict | None) -> int | None:
    """The exit code in a FailJob condition's message ("... failed with exit code 2 matching
    FailJob rule at index 1"), when the Job is still cached."""
    for condition in ((job or {}).get("status") or {}).get("conditions") or []:
        found = re.search(r"exit code (\d+)", condition.get("message") or "")
        if condition.get("type") == "Failed" and found:
            return int(found.group(1))
    return None


def queue_selector(queue: str) -> str:
    return f"{QUEUE_LABEL}={queue}"


@dataclass
class PodOptions:
    """Everything about the worker pod that comes from flags (and the optional pod-spec file)."""

    image: str
    command: list[str] | None = None
    args: list[str] | None = None
    env: dict[str, str] = field(default_factory=dict)
    resources: dict[str, Any] | None = None
    pvc: str | None = None
    mount_path: str | None = None
    read_only_volume: bool = True
    service_account: str | None = None
    node_selector: dict[str, str] | None = None
    tolerations: list[dict[str, Any]] | None = None
    backoff_limit: int = 0
    active_deadline_seconds: int | None = None
    ttl_seconds_after_finished: int | None = None
    pod_spec_patch: dict[str, Any] | None = None
    job_labels: dict[str, str] = field(default_factory=dict)
    standard_labels: dict[str, str] = field(default_factory=dict)  # app.kubernetes.io/*
    job_annotations: dict[str, str] = field(default_factory=dict)
    kueue_queue: str | None = None  # the Job is created suspended, for Kueue to admit
    fail_fast_exit_codes: list[int] = field(default_factory=list)  # FailJob on these codes
    fs_group: int | None = None  # the group the pod's volumes are writable by
    run_as_user: int | None = None  # the uid the worker runs as (None: the image's user)


def pod_security(fs_group: int | None, run_as_user: int | None = None) -> dict[str, Any]:
    """The worker pod's securityContext: non-root, the runtime's seccomp profile, the uid to
    run as when one is given, and - with `fs_group` - the group its volumes are made writable
    by. `OnRootMismatch` changes a volume's ownership only when its root does not match
    already: a volume of a million files is not walked again at every pod's start."""
    security: dict[str, Any] = {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
    if run_as_user is not None:
        security["runAsUser"] = run_as_user
    if fs_group is not None:
        security["fsGroup"] = fs_group
        security["fsGroupChangePolicy"] = "OnRootMismatch"
    return security


def config_map(queue: str, namespace: str, item: str, data: dict[str, Any]) -> dict[str, Any]:
    body = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    size = len(body.encode("utf-8"))
    if size > MAX_ITEM_BYTES:
        raise ItemTooLarge(
            f"item {item!r}: its data is {size:,} bytes; a ConfigMap holds at most "
            f"{MAX_ITEM_BYTES:,}"
        )
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": object_name(queue, item, data.get("version")),
            "namespace": namespace,
            "labels": labels(queue, item),
            "annotations": {ITEM_ANNOTATION: item},
        },
        "data": {ITEM_FILE_KEY: body},
    }


def job(
    queue: str,
    namespace: str,
    item: str,
    attempt: int,
    pod: PodOptions,
    version: str | None = None,
) -> dict[str, Any]:
    name = object_name(queue, item, version)
    item_labels = labels(queue, item)
    env = [{"name": "WORK_ITEM_FILE", "value": f"{ITEM_MOUNT_DIR}/{ITEM_FILE_KEY}"}]
    env += [{"name": k, "value": v} for k, v in sorted(pod.env.items())]
    mounts = [{"name": "work-item", "mountPath": ITEM_MOUNT_DIR, "readOnly": True}]
    volumes: list[dict[str, Any]] = [{"name": "work-item", "configMap": {"name": name}}]
    if pod.pvc:
        volumes.append(
            {
                "name": "shared",
                "persistentVolumeClaim": {"claimName": pod.pvc, "readOnly": pod.read_only_volume},
            }
        )
        mounts.append(
            {
                "name": "shared",
                "mountPath": pod.mount_path or "/data",
                "readOnly": pod.read_only_volume,
            }
        )
    container: dict[str, Any] = {
        "name": "worker",
        "image": pod.image,
        "env": env,
        "volumeMounts": mounts,
        "securityContext": {
            "runAsNonRoot": True,
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
    }
    if pod.command:
        container["command"] = list(pod.command)
    if pod.args:
        container["args"] = list(pod.args)
    if pod.resources:
        container["resources"] = copy.deepcopy(pod.resources)
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "securityContext": pod_security(pod.fs_group, pod.run_as_user),
        "containers": [container],
        "volumes": volumes,
    }
    if pod.service_account:
        spec["serviceAccountName"] = pod.service_account
    if pod.node_selector:
        spec["nodeSelector"] = dict(pod.node_selector)
    if pod.tolerations:
        spec["tolerations"] = copy.deepcopy(pod.tolerations)
    if pod.pod_spec_patch:
        spec = merge(spec, pod.pod_spec_patch)
    job_spec: dict[str, Any] = {
        "backoffLimit": pod.backoff_limit,
        # A replacement pod starts only once the failed one has fully terminated: never two
        # workers on one item at once (the default, TerminatingOrFailed, allows it).
        "podReplacementPolicy": "Failed",
        # A pod ended by the cluster (drain, preemption, eviction: DisruptionTarget) does not
        # count against the Job's backoffLimit.
        "podFailurePolicy": {
            "rules": [
                {
                    "action": "Ignore",
                    "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
                }
            ]
        },
        "template": {"metadata": {"labels": {**pod.standard_labels, **item_labels}}, "spec": spec},
    }
    if pod.fail_fast_exit_codes:  # the item fails at once: no more pods, no more attempts
        job_spec["podFailurePolicy"]["rules"].append(
            {
                "action": "FailJob",
                "onExitCodes": {
                    "containerName": "worker",
                    "operator": "In",
                    "values": sorted(set(pod.fail_fast_exit_codes)),
                },
            }
        )
    job_labels = {**pod.job_labels, **pod.standard_labels, **item_labels}  # ours win
    if pod.kueue_queue:
        job_labels[KUEUE_QUEUE_LABEL] = pod.kueue_queue
        job_spec["suspend"] = True  # Kueue unsuspends it when the queue admits it
    if pod.active_deadline_seconds is not None:
        job_spec["activeDeadlineSeconds"] = pod.active_deadline_seconds
    if pod.ttl_seconds_after_finished is not None:
        job_spec["ttlSecondsAfterFinished"] = pod.ttl_seconds_after_finished
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": job_labels,
            "annotations": {
                **pod.job_annotations,
                ITEM_ANNOTATION: item,
                ATTEMPT_ANNOTATION: str(attempt),
                **({VERSION_ANNOTATION: version} if version is not None else {}),
            },
            "finalizers": [RECORD_FINALIZER],
        },
        "spec": job_spec,
    }


def event(
    involved: dict[str, Any], namespace: str, reason: str, message: str, *,
    kind: str = "Warning", component: str = "workqueue-manager",
) -> dict[str, Any]:  # fmt: skip
    """A core/v1 Event about `involved` ({apiVersion, kind, name, uid}) in `namespace`, as
    `kubectl describe` shows it (the legacy fields every kubectl version reads)."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{involved['name']}.", "namespace": namespace},
        "involvedObject": {**involved, "namespace": namespace},
        "reason": reason,
        "message": message,
        "type": kind,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
        "source": {"component": component},
        "reportingComponent": component,
    }


def owner_reference(job_object: dict[str, Any]) -> dict[str, Any]:
    """An ownerReference to a created Job (it must carry its uid): deleting the Job deletes
    what it owns."""
    meta = job_object["metadata"]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
