"""Pause, resume and scale on Kubernetes without the WorkQueue CRD: a `<queue>-control`
ConfigMap, the queue's own object (with the CRD installed, `queue_resource.py` does this).

`workqueue pause --backend kubernetes` sets `paused_since` (epoch seconds) in it; `workqueue
resume` removes that key; `workqueue scale --parallelism N` sets `parallelism`; `workqueue
resume --accept-removals` sets `removals_accepted` (epoch seconds). It is deleted
when no key is left. Every manager of the queue caches it (one label-selected list +
watch, like the Jobs), so a standby that takes over, or a restarted leader, obeys it at once,
and a pause made while a manager runs reaches it within a watch event - no polling.
"""

from __future__ import annotations

import json
import time

from ..client.api import KubeApi, KubeError
from ..client.cache import ClusterCache
from ..manifests import objects as ko
from ..records.record import ROLE_LABEL

ROLE = "control"


def name_of(queue: str) -> str:
    return f"{queue}-control"


def selector(queue: str) -> str:
    return f"{ko.QUEUE_LABEL}={queue},{ROLE_LABEL}={ROLE}"


def since_of(config_map: dict | None) -> float | None:
    data = (config_map or {}).get("data") or {}
    if "paused_since" not in data:
        return None
    try:
        return float(data["paused_since"])
    except (TypeError, ValueError):
        return time.time()  # unreadable: stay paused rather than run what someone held back


HELD = "removals_held_since"  # epoch seconds: a mass removal the manager holds


def parallelism_of(config_map: dict | None) -> int | None:
    text = ((config_map or {}).get("data") or {}).get("parallelism")
    return int(text) if isinstance(text, str) and text.isdigit() else None


def accepted_of(config_map: dict | None) -> float | None:
    """When held removals were last accepted (`workqueue resume --accept-removals`)."""
    text = ((config_map or {}).get("data") or {}).get("removals_accepted")
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


class Control:
    """The queue's controls in its control ConfigMap (`QueueControls`), for a cluster without
    the WorkQueue CRD: a manager reads them from a cache (`start`), a queue command that never
    starts it from the API server, each call - the same object, so `workqueue pause` writes
    what the manager reads."""

    def __init__(self, api: KubeApi, queue: str) -> None:
        self.queue = queue
        self.api = api
        self.cache = ClusterCache(api, selector(queue), kind="configmaps")
        self._following = False  # Invariant: True once the cache has listed (`start`)

    def _object(self) -> dict | None:
        """The ConfigMap as this object follows it: the cache's once started, else fresh."""
        return self.cache.get(name_of(self.queue)) if self._following else self._fresh()

    def _fresh(self) -> dict | None:
        """The ConfigMap as the API server has it now (what a change is made over)."""
        return self.api.find("configmaps", name_of(self.queue))

    def start(self, timeout: float = 60.0) -> Control:
        """Start the cache and wait until it has listed the ConfigMap once: a manager that
        dispatched before would not know the queue is paused (it ran a paused queue's items
        when its start was slow). A `UserError` when the list does not come in `timeout`."""
        self.cache.start_listed(timeout, f"cannot read the control ConfigMap of queue {self.queue}")
        self._following = True
        return self

    def stop(self) -> None:
        self.cache.stop()

    def paused_since(self) -> float | None:
        return since_of(self._object())

    def set_paused(self, since: float | None) -> None:
        """Pause as of `since` (a pause already in force keeps its time), or resume (None)."""
        if since is None:
            set_key(self.api, self.queue, "paused_since", None)
        elif since_of(self._fresh()) is None:
            set_key(self.api, self.queue, "paused_since", repr(since))

    def wanted_parallelism(self) -> int | None:
        return parallelism_of(self._object())

    def removals_accepted(self) -> float | None:
        return accepted_of(self._object())

    def accept_removals(self) -> None:
        set_key(self.api, self.queue, "removals_accepted", repr(time.time()))

    def want_parallelism(self, parallelism: int) -> None:
        set_key(self.api, self.queue, "parallelism", str(parallelism))

    def wanted_group_rules(self) -> dict | None:
        return group_rules_of(self._object())

    def want_group_rules(self, rules: dict) -> None:
        """Merged into what the ConfigMap asks (a kind left out keeps its rules), as the API
        server has it now."""
        asked = {**(group_rules_of(self._fresh()) or {}), **rules}
        set_key(self.api, self.queue, GROUP_RULES, json.dumps(asked))

    def removals_held_since(self) -> float | None:
        text = ((self._object() or {}).get("data") or {}).get(HELD)
        try:
            return float(text) if text is not None else None
        except ValueError:
            return None

    def hold_removals(self, since: float | None) -> None:
        set_key(self.api, self.queue, HELD, None if since is None else repr(since))

    keeps_status = False

    def report(self, status: dict) -> None:
        """Nothing to write: without the CRD, `workqueue status` reads the record itself."""


def set_key(api: KubeApi, queue: str, key: str, value: str | None) -> dict | None:
    """Set (or, with None, remove) one key of the control ConfigMap: created when missing,
    deleted when no key is left. Returns the ConfigMap as it was before."""
    for _ in range(10):
        current = api.find("configmaps", name_of(queue))
        if current is None:
            if value is None:
                return None
            body = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": name_of(queue),
                    "labels": {**ko.MANAGED_BY, ko.QUEUE_LABEL: queue, ROLE_LABEL: ROLE},
                },
                "data": {key: value},
            }
            try:
                api.create("configmaps", body)
                return None
            except KubeError as exc:
                if exc.reason != "AlreadyExists":
                    raise
                continue
        data = dict(current.get("data") or {})
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
        try:
            if not data:
                api.delete("configmaps", name_of(queue), uid=current["metadata"]["uid"],
                           resource_version=current["metadata"]["resourceVersion"])  # fmt: skip
            else:
                api.replace("configmaps", name_of(queue), {**current, "data": data})
            return current
        except KubeError as exc:
            if exc.reason not in ("Conflict", "NotFound"):
                raise
    raise KubeError(409, "Conflict", f"configmap {name_of(queue)}: too many concurrent writers")


GROUP_RULES = "group-rules"  # the key of `workqueue scale --limit/--rate`'s rules (JSON)


def group_rules_of(configmap: dict | None) -> dict | None:
    """The group rules the control ConfigMap asks for, or None."""
    text = ((configmap or {}).get("data") or {}).get(GROUP_RULES)
    try:
        found = json.loads(text) if text else None
    except ValueError:
        return None
    return found if isinstance(found, dict) else None
