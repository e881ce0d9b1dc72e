"""Pause and resume on Kubernetes: a `<queue>-control` ConfigMap, the queue's own object.

`workqueue pause --backend kubernetes` creates it with `paused_since` (epoch seconds);
`workqueue resume` deletes it. Every manager of the queue caches it (one label-selected list +
watch, like the Jobs), so a standby that takes over, or a restarted leader, obeys it at once,
and a pause made while a manager runs reaches it within a watch event - no polling.
"""

from __future__ import annotations

import time

from . import objects as ko
from .api import KubeApi, KubeError
from .cache import ClusterCache
from .record import ROLE_LABEL

ROLE = "control"


def name_of(queue: str) -> str:
    return f"{queue}-control"


def selector(queue: str) -> str:
    return f"{ko.QUEUE_LABEL}={queue},{ROLE_LABEL}={ROLE}"


def since_of(config_map: dict | None) -> float | None:
    if config_map is None:
        return None
    try:
        return float((config_map.get("data") or {}).get("paused_since"))
    except (TypeError, ValueError):
        return time.time()  # unreadable: stay paused rather than run what someone held back


class Control:
    """The queue's pause state, from a cache of its control ConfigMap."""

    def __init__(self, api: KubeApi, queue: str) -> None:
        self.queue = queue
        self.cache = ClusterCache(api, selector(queue), kind="configmaps")

    def start(self) -> Control:
        self.cache.start()
        return self

    def stop(self) -> None:
        self.cache.stop()

    def paused_since(self) -> float | None:
        return since_of(self.cache.get(name_of(self.queue)))


def read(api: KubeApi, queue: str) -> float | None:
    """When the queue was paused, as the API server has it now; None when it is not."""
    return since_of(api.find("configmaps", name_of(queue)))


def pause(api: KubeApi, queue: str, since: float | None = None) -> float | None:
    """Pause the queue (as of `since`, default now); returns when it was already paused, or
    None if this paused it."""
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name_of(queue),
            "labels": {**ko.MANAGED_BY, ko.QUEUE_LABEL: queue, ROLE_LABEL: ROLE},
        },
        "data": {"paused_since": repr(time.time() if since is None else since)},
    }
    try:
        api.create("configmaps", body)
        return None
    except KubeError as exc:
        if exc.reason != "AlreadyExists":
            raise
        return read(api, queue)


def resume(api: KubeApi, queue: str) -> float | None:
    """Resume the queue; returns when it had been paused, or None if it was not."""
    current = api.find("configmaps", name_of(queue))
    if current is None:
        return None
    api.remove("configmaps", name_of(queue), current["metadata"]["uid"])
    return since_of(current)
