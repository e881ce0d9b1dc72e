"""What a Job's pod says about why its item is not running yet (or how it ran), in words.

The Job controller copies the pod template's labels - the queue and item-hash labels the
manager sets - onto every pod it makes, and adds `batch.kubernetes.io/job-name`; so one
label-selected list finds every pod of a queue. A Job whose pod cannot start still looks
"active" to the Job API; only the pod tells a person the real story: no node fits it
(`PodScheduled` false, reason `Unschedulable`), its image cannot be pulled, its configuration
is missing. A Job suspended by a queueing system (Kueue) waits for admission and has no pod.

Pure functions over the API's JSON (no client calls): `status` feeds them the pods it listed.
"""

from __future__ import annotations

from typing import Any

JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"  # an Indexed Job's pod's index
LEGACY_JOB_NAME_LABEL = "job-name"

# Waiting reasons of a container that will not start by itself: a person must act.
IMAGE_REASONS = ("ImagePullBackOff", "ErrImagePull", "InvalidImageName", "ErrImageNeverPull")
CONFIG_REASONS = ("CreateContainerConfigError", "CreateContainerError", "RunContainerError")


def job_name(pod: dict[str, Any]) -> str | None:
    labels = pod.get("metadata", {}).get("labels") or {}
    return labels.get(JOB_NAME_LABEL) or labels.get(LEGACY_JOB_NAME_LABEL)


def completion_index(pod: dict[str, Any]) -> int | None:
    """The completion index of an Indexed Job's pod (its annotation), or None."""
    index = (pod["metadata"].get("annotations") or {}).get(INDEX_ANNOTATION)
    return int(index) if index is not None and index.isdigit() else None


def _keep_newest(newest: dict, key, pod: dict[str, Any]) -> None:
    """`newest[key]` becomes `pod` unless it holds one created later."""
    kept = newest.get(key)
    created = pod["metadata"].get("creationTimestamp") or ""
    if kept is None or (kept["metadata"].get("creationTimestamp") or "") <= created:
        newest[key] = pod


def by_job(pods: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The newest pod of each Job (by creation time), keyed by the Job's name."""
    newest: dict[str, dict[str, Any]] = {}
    for pod in pods:
        name = job_name(pod)
        if name is not None:
            _keep_newest(newest, name, pod)
    return newest


def by_index(pods: list[dict[str, Any]]) -> dict[str, dict[int, dict[str, Any]]]:
    """The newest pod of each completion index of each Indexed Job (a batch), keyed by the
    Job's name and then the index (`completion_index`)."""
    newest: dict[str, dict[int, dict[str, Any]]] = {}
    for pod in pods:
        name, index = job_name(pod), completion_index(pod)
        if name is not None and index is not None:
            _keep_newest(newest.setdefault(name, {}), index, pod)
    return newest


def waiting_reason(job: dict[str, Any], pod: dict[str, Any] | None) -> str | None:
    """Why a Job that has not finished is not running its worker, or None when it is (or when
    nothing says otherwise)."""
    if (job.get("spec") or {}).get("suspend"):
        return "waiting for admission (the Job is suspended, e.g. by Kueue)"
    if pod is None:
        return None
    status = pod.get("status") or {}
    for condition in status.get("conditions") or []:
        if (
            condition.get("type") == "PodScheduled"
            and condition.get("status") == "False"
            and condition.get("reason") == "Unschedulable"
        ):
            return _with("waiting for a node (unschedulable)", condition.get("message"), limit=160)
    for container in container_statuses(status):
        waiting = (container.get("state") or {}).get("waiting") or {}
        reason = waiting.get("reason")
        if reason in IMAGE_REASONS:
            image = container.get("image") or "the image"
            return _with(f"image cannot be pulled ({reason}): {image}", waiting.get("message"))
        if reason in CONFIG_REASONS:
            return _with(f"cannot start ({reason})", waiting.get("message"))
    if status.get("phase") == "Pending":
        return "starting: the pod is pending"
    return None


def summary(pod: dict[str, Any] | None) -> dict[str, Any] | None:
    """The pod's state for `workqueue status NAME`: name, phase, node, and each container's
    state (waiting with its reason, running since, terminated with its exit code)."""
    if pod is None:
        return None
    status = pod.get("status") or {}
    containers = []
    for container in container_statuses(status):
        state = container.get("state") or {}
        kind = next(iter(state), "unknown")
        detail = state.get(kind) or {}
        containers.append(
            {
                "name": container.get("name"),
                "state": kind,
                "reason": detail.get("reason"),
                "exit_code": detail.get("exitCode"),
                "restarts": container.get("restartCount", 0),
            }
        )
    return {
        "name": pod["metadata"]["name"],
        "phase": status.get("phase"),
        "node": (pod.get("spec") or {}).get("nodeName"),
        "containers": containers,
    }


def exit_code(pod: dict[str, Any] | None) -> int | None:
    """The exit code of the pod's (first) terminated container."""
    if pod is None:
        return None
    for container in container_statuses(pod.get("status") or {}):
        terminated = (container.get("state") or {}).get("terminated")
        if terminated and terminated.get("exitCode") is not None:
            return int(terminated["exitCode"])
    return None


def container_statuses(status: dict[str, Any]) -> list[dict[str, Any]]:
    """The statuses of a pod's init containers, then its containers."""
    return list(status.get("initContainerStatuses") or []) + list(
        status.get("containerStatuses") or []
    )


def _with(text: str, message: str | None, limit: int = 200) -> str:
    if not message:
        return text
    message = " ".join(message.split())
    return f"{text}: {message[:limit]}"
