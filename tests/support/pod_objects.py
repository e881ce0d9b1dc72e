"""The objects the test kubelet writes, as the Job controller and a kubelet leave them: Pods
through their life, Job conditions, a finished pod's passage through the Job's
`uncountedTerminatedPods`, and the rules it reads from a Job's spec.

A pod of a Job carries the template's labels plus `batch.kubernetes.io/job-name` and
`job-name`, is owned by its Job (controller, blockOwnerDeletion: deleting the Job deletes it),
and goes Running (one running container) -> Succeeded or Failed (the container's exit code,
reason Completed or Error). A pod that cannot start stays Pending: unschedulable (a
PodScheduled=False condition, no node) or waiting with a reason (`ImagePullBackOff`, ...).
An Indexed Job's pod carries its index as the `batch.kubernetes.io/job-completion-index`
annotation and label, and every container gets JOB_COMPLETION_INDEX from that annotation
through the downward API, unless it declares the variable itself. Sources: the Kubernetes API
reference (Pod, Job v1) and the Indexed Job documentation.

Environment values are expanded as the kubelet does: `$(NAME)` of an entry declared earlier
is its value, `$$` is a literal `$`, an unknown `$(NAME)` stays as written.

Everything here is pure (dicts in, dicts out); the kubelet (`kubelet.py`) writes them.
"""

from __future__ import annotations

import re

from .apiserver import now_rfc3339

INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"


def pod(
    job: dict,
    phase: str,
    state: dict,
    conditions: list | None = None,
    index: int | None = None,
) -> dict:
    """A pod of `job` in `phase`, its container in `state` (the module docstring)."""
    meta = job["metadata"]
    template = job["spec"]["template"]
    labels = dict((template.get("metadata") or {}).get("labels") or {})
    labels.update({"batch.kubernetes.io/job-name": meta["name"], "job-name": meta["name"]})
    pod_spec = template["spec"]
    annotations = {}
    prefix = f"{meta['name']}-"
    if index is not None:
        labels[INDEX_ANNOTATION] = annotations[INDEX_ANNOTATION] = str(index)
        prefix = f"{meta['name']}-{index}-"
        pod_spec = with_index_env(pod_spec)
    container = template["spec"]["containers"][0]
    # written out, not taken from the manager's objects.owner_reference: the stand-in plays
    # the Job controller, and must not share the code it checks
    owner = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    return {
        "metadata": {
            "generateName": prefix,
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [owner],
        },
        "spec": {**pod_spec, "nodeName": "" if conditions else "test-node"},
        "status": {
            "phase": phase,
            "conditions": conditions or [],
            "containerStatuses": [_container_status(container, phase == "Running", state)],
        },
    }


def ended(container: dict, code: int) -> dict:
    """The status merge patch of a pod whose container exited with `code`."""
    state = {"terminated": {"exitCode": code, "reason": "Completed" if code == 0 else "Error"}}
    return {
        "status": {
            "phase": "Succeeded" if code == 0 else "Failed",
            "containerStatuses": [_container_status(container, False, state)],
        }
    }


def stuck(job: dict, reason: str) -> tuple[dict, list | None]:
    """(container state, pod conditions) of a pod of `job` that never starts for `reason`:
    `Unschedulable` (no node fits it), else waiting with that reason for its image."""
    if reason == "Unschedulable":
        condition = {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": "0/3 nodes are available: 3 Insufficient cpu.",
        }
        return {"waiting": {"reason": "ContainerCreating"}}, [condition]
    image = job["spec"]["template"]["spec"]["containers"][0]["image"]
    message = f'Back-off pulling image "{image}"'
    return {"waiting": {"reason": reason, "message": message}}, None


def _container_status(container: dict, ready: bool, state: dict) -> dict:
    return {
        "name": container["name"],
        "image": container["image"],
        "ready": ready,
        "restartCount": 0,
        "state": state,
    }


def condition(kind: str, reason: str) -> dict:
    """A Job condition of `kind` (status True) with `reason`, stamped now."""
    stamp = now_rfc3339()
    return {
        "type": kind,
        "status": "True",
        "reason": reason,
        "lastProbeTime": stamp,
        "lastTransitionTime": stamp,
    }


def fail_job_rule(spec: dict, container: str, code: int) -> int | None:
    """The index of the podFailurePolicy FailJob rule an exit code matches, or None."""
    rules = ((spec.get("podFailurePolicy") or {}).get("rules")) or []
    for index, rule in enumerate(rules):
        match = rule.get("onExitCodes") or {}
        if rule.get("action") != "FailJob" or not match:
            continue
        if match.get("containerName") not in (None, container):
            continue
        values = match.get("values") or []
        if (match.get("operator") == "In") == (code in values):
            return index
    return None


def env_value(item: dict, annotations: dict[str, str], declared: dict[str, str]) -> str:
    """One env entry's value: `value` with `$(NAME)` of earlier entries expanded (`$$` is a
    literal `$`, an unknown name stays as written), or a downward-API annotation."""
    source = (item.get("valueFrom") or {}).get("fieldRef") or {}
    found = re.fullmatch(r"metadata\.annotations\['(.+)'\]", source.get("fieldPath") or "")
    if found:
        return annotations.get(found.group(1), "")

    def expand(match: re.Match) -> str:
        if match.group(0) == "$$":
            return "$"
        return declared.get(match.group(1), match.group(0))

    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)", expand, item.get("value", ""))


def with_index_env(pod_spec: dict) -> dict:
    """The pod spec as the Job controller makes an Indexed Job's pods: every container is
    given JOB_COMPLETION_INDEX from the index annotation, unless it declares it itself."""
    containers = []
    for container in pod_spec.get("containers") or []:
        env = list(container.get("env") or [])
        if not any(e.get("name") == "JOB_COMPLETION_INDEX" for e in env):
            path = f"metadata.annotations['{INDEX_ANNOTATION}']"
            env.append({"name": "JOB_COMPLETION_INDEX",
                        "valueFrom": {"fieldRef": {"fieldPath": path}}})  # fmt: skip
        containers.append({**container, "env": env})
    return {**pod_spec, "containers": containers}


def job_condition(kind: str, reason: str, message: str) -> dict:
    """A Job condition of `kind`, True, stamped now."""
    stamp = now_rfc3339()
    return {"type": kind, "status": "True", "reason": reason, "message": message,
            "lastProbeTime": stamp, "lastTransitionTime": stamp}  # fmt: skip


def uncounted(uid: str, ok: bool) -> dict:
    """The status patch of a pod that finished but is not counted yet."""
    return {"uncountedTerminatedPods": {"succeeded" if ok else "failed": [uid]}}


COUNTED = {"uncountedTerminatedPods": {"succeeded": None, "failed": None}}  # emptied again
