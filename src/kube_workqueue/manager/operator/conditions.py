"""What the operator says on a WorkQueue it cannot run, or not yet: its conditions and Events.

While a queue's manager runs, the manager writes the WorkQueue's whole status - counts,
forecast and every condition, Ready/Progressing/Degraded included (`steering.queue_resource`).
The operator writes status only when no manager of the queue does: a spec it cannot run
(`Ready=False`, reason `InvalidSpec`, `UnknownSource`, `SecretNotFound`, `Conflict`), a manager
starting or waiting for its Lease, a manager that failed and will start again (`Degraded`).
Each write replaces the conditions (a merge patch replaces a list) and keeps a condition's
lastTransitionTime while its status stays.

Events (core/v1, on the WorkQueue) tell the same changes to `kubectl describe` and to whoever
watches events; one is posted per change of (type, reason, message), not per reconcile.
"""

from __future__ import annotations

import logging
import time

from ..backends.kubernetes.client.api import KubeApi, KubeError
from ..backends.kubernetes.manifests import objects as ko
from ..backends.kubernetes.steering.queue_resource import rfc3339, summary_conditions

log = logging.getLogger(__name__)

KIND = "workqueues.v1beta1"
API_VERSION = "workqueue.dev/v1beta1"
COMPONENT = "workqueue-operator"


def conditions(obj: dict, ready: tuple[bool, str, str], degraded: tuple[bool, str, str]) -> list:
    """Ready, Progressing (False: nothing runs while the operator speaks) and Degraded, as
    (status, reason, message) for Ready and Degraded."""
    before = {c.get("type"): c for c in ((obj.get("status") or {}).get("conditions") or [])}
    now = rfc3339(time.time())
    states = {
        "Ready": ready,
        "Progressing": (False, "NotRunning", "no manager of this queue is dispatching"),
        "Degraded": degraded,
    }
    return summary_conditions(states, before, now)


def write(api: KubeApi, obj: dict, ready: tuple[bool, str, str],
          degraded: tuple[bool, str, str] = (False, "AsExpected", "")) -> None:  # fmt: skip
    status = {
        "observedGeneration": obj["metadata"].get("generation", 1),
        "conditions": conditions(obj, ready, degraded),
    }
    api.patch_status(KIND, obj["metadata"]["name"], {"status": status})


class EventPoster:
    """Events on WorkQueues, one per change of what is said about each."""

    def __init__(self) -> None:
        self._last: dict[str, tuple[str, str, str]] = {}

    def post(self, api: KubeApi, obj: dict, kind: str, reason: str, message: str) -> None:
        meta = obj["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        if self._last.get(key) == (kind, reason, message):
            return
        self._last[key] = (kind, reason, message)
        involved = {"apiVersion": API_VERSION, "kind": "WorkQueue", "name": meta["name"],
                    "uid": meta.get("uid")}  # fmt: skip
        event = ko.event(involved, meta["namespace"], reason, message[:1000], kind=kind,
                         component=COMPONENT)  # fmt: skip
        try:
            api.create("events", event)
        except KubeError as exc:  # an event is a courtesy
            log.warning("could not post event %s on %s: %s", reason, key, exc)

    def forget(self, key: str) -> None:
        self._last.pop(key, None)
