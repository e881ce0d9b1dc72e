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
    """The queue's pause state, from a cache of its control ConfigMap."""

    def __init__(self, api: KubeApi, queue: str) -> None:
        self.queue = queue
        self.cache = ClusterCache(api, selector(queue), kind="configmaps")

    def start(self, timeout: float = 60.0) -> Control:
        """Start the cache and wait until it has listed the ConfigMap once: a manager that
        dispatched before would not know the queue is paused (it ran a paused queue's items
        when its start was slow). A `UserError` when the list does not come in `timeout`."""
        self.cache.start_listed(timeout, f"cannot read the control ConfigMap of queue {self.queue}")
        return self

    def stop(self) -> None:
        self.cache.stop()

    def paused_since(self) -> float | None:
        return since_of(self.cache.get(name_of(self.queue)))

    def wanted_parallelism(self) -> int | None:
        return parallelism_of(self.cache.get(name_of(self.queue)))

    def removals_accepted(self) -> float | None:
        return accepted_of(self.cache.get(name_of(self.queue)))

    def want_parallelism(self, parallelism: int) -> None:
        set_key(self.cache.api, self.queue, "parallelism", str(parallelism))

    def wanted_group_rules(self) -> dict | None:
        return group_rules_of(self.cache.get(name_of(self.queue)))

    def want_group_rules(self, rules: dict) -> None:
        ask_group_rules(self.cache.api, self.queue, rules)

    def removals_held_since(self) -> float | None:
        text = ((self.cache.get(name_of(self.queue)) or {}).get("data") or {}).get(HELD)
        try:
            return float(text) if text is not None else None
        except ValueError:
            return None

    def hold_removals(self, since: float | None) -> None:
        set_key(self.cache.api, self.queue, HELD, None if since is None else repr(since))

    keeps_status = False

    def report(self, status: dict) -> None:
        """Nothing to write: without the CRD, `workqueue status` reads the record itself."""


def read(api: KubeApi, queue: str) -> float | None:
    """When the queue was paused, as the API server has it now; None when it is not."""
    return since_of(api.find("configmaps", name_of(queue)))


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


def pause(api: KubeApi, queue: str, since: float | None = None) -> float | None:
    """Pause the queue (as of `since`, default now); returns when it was already paused, or
    None if this paused it."""
    already = read(api, queue)
    if already is not None:
        return already
    set_key(api, queue, "paused_since", repr(time.time() if since is None else since))
    return None


def resume(api: KubeApi, queue: str) -> float | None:
    """Resume the queue; returns when it had been paused, or None if it was not."""
    return since_of(set_key(api, queue, "paused_since", None))


def accept_removals(api: KubeApi, queue: str) -> None:
    """Accept the removals the queue's manager holds (it acts on them at once)."""
    set_key(api, queue, "removals_accepted", repr(time.time()))


def scale(api: KubeApi, queue: str, parallelism: int) -> int | None:
    """Ask for `parallelism`; returns what was asked before (None: nothing was)."""
    return parallelism_of(set_key(api, queue, "parallelism", str(parallelism)))


GROUP_RULES = "group-rules"  # the key of `workqueue scale --limit/--rate`'s rules (JSON)


def ask_group_rules(api: KubeApi, queue: str, rules: dict) -> None:
    """Merge `rules` into what the control ConfigMap asks (a kind left out keeps its rules),
    as the API server has it now."""
    asked = {**(group_rules_of(api.find("configmaps", name_of(queue))) or {}), **rules}
    set_key(api, queue, GROUP_RULES, json.dumps(asked))


def group_rules_of(configmap: dict | None) -> dict | None:
    """The group rules the control ConfigMap asks for, or None."""
    text = ((configmap or {}).get("data") or {}).get(GROUP_RULES)
    try:
        found = json.loads(text) if text else None
    except ValueError:
        return None
    return found if isinstance(found, dict) else None
