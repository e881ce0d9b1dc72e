"""The queue's `WorkQueue` resource (workqueue.dev/v1alpha1): what kubectl, an HPA and KEDA see.

One per queue, named as the queue, in its namespace (the chart's `crds/` installs the CRD).

    spec    parallelism (>= 0; 0 starts nothing new), paused   - asked by a person (`kubectl
            scale`, `workqueue scale`, `workqueue pause`), an HPA or KEDA (`/scale`), or the
            built-in autoscaler (`--autoscale`, which writes spec.parallelism so the object
            always tells the truth)
    status  replicas (the parallelism in force: the scale subresource's status), selector,
            counts, oldestWaitingSeconds, serviceSeconds, interarrivalSeconds, forecast,
            scaledBy, conditions (Paused, StorageFault, SourceUnavailable), observedGeneration

Following: the manager caches the object (one label-selected list + watch, as it does its
Jobs), so a change of spec takes effect within a watch event - `runtime/asked.py` reads the
cache twice a second, no API call. At start an existing WorkQueue's spec wins over the flags;
one the manager creates is seeded from `--parallelism` (and labelled, so the cache finds it).

Writing status: `report` is handed the queue every few seconds (`Asked.status_report`) and
writes it (a merge patch of /status) only when it differs from what was last written, and at
most once every MIN_WRITE_SECONDS: at most 12 writes a minute, none while nothing changes -
except that a status answering a change of spec (another observedGeneration, replicas or
Paused) is written at once, since that is what `kubectl wait`, an HPA and KEDA wait to see
(as many more writes as the spec changes: a person's or an autoscaler's pace).
Conditions keep their lastTransitionTime until their status changes.

Where the CRD is not installed (no rights to install CRDs), `control.Control`'s ConfigMap keeps
pause, resume and scale working; `parts.setup` chooses by asking the API server (`served`).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from datetime import UTC, datetime

from ..client.api import KubeApi, KubeError
from ..client.cache import ClusterCache
from ..manifests import objects as ko
from .leader import parse_time

log = logging.getLogger(__name__)

KIND = "workqueues"
API_VERSION = "workqueue.dev/v1alpha1"
MIN_WRITE_SECONDS = 5.0
CONDITIONS = ("Paused", "Stuck", "StorageFault", "SourceUnavailable")
# and before them the summary every queue's status carries (`_summary`: Ready, Progressing,
# Degraded - what `kubectl wait --for=condition=Ready` waits for)


def rfc3339(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def body_of(queue: str, parallelism: int, paused: bool = False) -> dict:
    return {
        "apiVersion": API_VERSION,
        "kind": "WorkQueue",
        "metadata": {"name": queue, "labels": {**ko.MANAGED_BY, ko.QUEUE_LABEL: queue}},
        "spec": {"parallelism": parallelism, "paused": paused},
    }


def ensure(api: KubeApi, queue: str, parallelism: int, owner: dict | None = None) -> dict:
    """The queue's WorkQueue as the API server has it: created (seeded with `parallelism`,
    owned by `owner` - the manager's Deployment - when given) when there is none, labelled for
    the cache when someone made it without the label, and given `owner` when it has none."""
    current = api.find(KIND, queue)
    if current is None:
        body = body_of(queue, parallelism)
        if owner is not None:
            body["metadata"]["ownerReferences"] = [owner]
        try:
            return api.create(KIND, body)
        except KubeError as exc:
            if exc.reason != "AlreadyExists":
                raise
            current = api.get(KIND, queue)  # a rival manager made it first
    patch: dict = {}
    labels = current["metadata"].get("labels") or {}
    if labels.get(ko.QUEUE_LABEL) != queue:
        patch["labels"] = {ko.QUEUE_LABEL: queue}
    if owner is not None and not current["metadata"].get("ownerReferences"):
        patch["ownerReferences"] = [owner]  # (one made by an earlier version: owned now)
    if patch:
        current = api.patch(KIND, queue, {"metadata": patch})
    return current


def set_spec(api: KubeApi, queue: str, spec: dict) -> dict:
    """Change the WorkQueue's spec (creating it when no manager has yet, seeded with 1)."""
    if api.find(KIND, queue) is None:
        ensure(api, queue, int(spec.get("parallelism", 1)))
    if set(spec) == {"parallelism"}:  # as kubectl scale, an HPA or KEDA would
        return api.patch_scale(KIND, queue, spec["parallelism"])
    return api.patch(KIND, queue, {"spec": spec})


def clearing(new: dict, old: dict) -> dict:
    """A merge patch that makes `old` into `new`: a field `old` has and `new` lacks is sent as
    null - a merge patch that leaves a field out keeps it (RFC 7386), and the status said
    `oldestWaitingSeconds: 93.8` long after nothing waited. Nested objects likewise; lists are
    replaced whole, as merge patches do."""
    patch = dict(new)
    for key, value in old.items():
        if key not in new:
            patch[key] = None
        elif isinstance(value, dict) and isinstance(new[key], dict):
            patch[key] = clearing(new[key], value)
    return patch


ACCEPTED = "workqueue.dev/removals-accepted"  # epoch seconds: `resume --accept-removals`
HELD = "workqueue.dev/removals-held-since"  # epoch seconds: a mass removal its manager holds


def accept_removals(api: KubeApi, queue: str) -> None:
    """Accept the removals the queue's manager holds: an annotation on its WorkQueue (the
    spec stays what people and autoscalers declare)."""
    api.patch(KIND, queue, {"metadata": {"annotations": {ACCEPTED: repr(time.time())}}})


def _paused_condition(obj: dict) -> float | None:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Paused" and condition.get("status") == "True":
            return parse_time(condition.get("lastTransitionTime")) or None  # 0: unreadable
    return None


class QueueResource:
    """The queue's pause and parallelism from its WorkQueue (cached), and its status written
    there - the `control` of a `ClusterLedger`."""

    def __init__(
        self, api: KubeApi, queue: str, seed_parallelism: int = 1, stuck=lambda: {}
    ) -> None:
        """`stuck()`: pods of the queue that cannot start, by reason (`stuck.StuckDetector`;
        the Stuck condition). Not started (a queue command's), every read asks the API
        server; started (a manager's), a cache of the WorkQueue answers."""
        self.api = api
        self.stuck = stuck
        self.queue = queue
        self.seed = seed_parallelism
        self.changed = threading.Event()  # set on every change of the WorkQueue (its watch)
        self.cache = ClusterCache(api, f"{ko.QUEUE_LABEL}={queue}", kind=KIND, keep=("spec",),
                                  on_change=lambda _kind, _obj: self.changed.set())  # fmt: skip
        self._paused_seen: float | None = None  # when this manager first saw spec.paused
        self._written: dict | None = None  # the status last written
        self._written_at = float("-inf")
        self._following = False  # Invariant: True once the cache has listed (`start`)

    def start(self, timeout: float = 60.0) -> QueueResource:
        """Make sure the WorkQueue exists, start its cache and wait until it has listed it
        once (before, a pause in its spec would not be known). A `UserError` when the list
        does not come in `timeout`."""
        ensure(self.api, self.queue, self.seed)
        self.cache.start_listed(timeout, f"cannot read the WorkQueue {self.queue}")
        self._following = True
        return self

    def stop(self) -> None:
        self.cache.stop()

    def _object(self) -> dict | None:
        return self.cache.get(self.queue) if self._following else self.api.find(KIND, self.queue)

    # -- what is asked ---------------------------------------------------------------------

    def wanted_parallelism(self) -> int | None:
        obj = self._object()
        wanted = ((obj or {}).get("spec") or {}).get("parallelism")
        return wanted if isinstance(wanted, int) and wanted >= 0 else None

    def paused_since(self) -> float | None:
        """When spec.paused became true: the Paused condition's time, else when this manager
        first saw it; None when it is not paused."""
        obj = self._object()
        if obj is None or not (obj.get("spec") or {}).get("paused"):
            self._paused_seen = None
            return None
        since = _paused_condition(obj)
        if since is not None:
            return since
        if self._paused_seen is None:
            self._paused_seen = time.time()
        return self._paused_seen

    def want_parallelism(self, parallelism: int) -> None:
        set_spec(self.api, self.queue, {"parallelism": parallelism})

    def set_paused(self, since: float | None) -> None:
        """`spec.paused` (its Paused condition, written by the manager, says since when)."""
        set_spec(self.api, self.queue, {"paused": since is not None})

    def accept_removals(self) -> None:
        accept_removals(self.api, self.queue)

    def wanted_group_rules(self) -> dict | None:
        """`spec.limits` and `spec.rates` (lists of rules as the flags write them)."""
        return group_rules_of(self._object())

    def want_group_rules(self, rules: dict) -> None:
        set_spec(self.api, self.queue, rules)

    def removals_held_since(self) -> float | None:
        annotations = ((self._object() or {}).get("metadata") or {}).get("annotations") or {}
        try:
            return float(annotations[HELD])
        except (KeyError, TypeError, ValueError):
            return None

    def hold_removals(self, since: float | None) -> None:
        """An annotation on the WorkQueue: a hold outlives its manager pod."""
        value = None if since is None else repr(since)
        self.api.patch(KIND, self.queue, {"metadata": {"annotations": {HELD: value}}})

    def removals_accepted(self) -> float | None:
        annotations = ((self._object() or {}).get("metadata") or {}).get("annotations") or {}
        try:
            return float(annotations[ACCEPTED])
        except (KeyError, TypeError, ValueError):
            return None

    # -- status ----------------------------------------------------------------------------

    keeps_status = True  # the WorkQueue's `status`

    def report(self, facts: dict) -> None:
        obj = self._object()
        if obj is None:
            return
        status = self.status_of(facts, obj)
        if status == self._written:
            return
        answers = _answer(status) != _answer(self._written)
        if not answers and time.monotonic() - self._written_at < MIN_WRITE_SECONDS:
            return
        # what is there: the last status written here (the cache may lag behind it), else
        # the cached one (written by an earlier manager)
        patch = clearing(status, self._written or obj.get("status") or {})
        self.api.patch_status(KIND, self.queue, {"status": patch})
        self._written, self._written_at = status, time.monotonic()

    def status_of(self, facts: dict, obj: dict) -> dict:
        """The WorkQueue's status for the manager's `status_report` facts - the counts it had
        kept, where the facts have none yet (a manager before its first listing)."""
        if "counts" not in facts:
            facts = {**facts, "counts": ((obj.get("status") or {}).get("counts") or {})}
        counts = facts.get("counts") or {}
        status: dict = {
            "observedGeneration": obj["metadata"].get("generation", 1),
            "replicas": int(facts.get("parallelism") or 0),
            "selector": f"{ko.QUEUE_LABEL}={self.queue}",
            "scaledBy": facts.get("scaled_by") or "external",
            "counts": {
                state: int(counts.get(state, 0))
                for state in ("pending", "running", "succeeded", "failed", "cancelled")
            },
        }
        for key, field in (
            ("oldest_waiting_seconds", "oldestWaitingSeconds"),
            ("service_seconds", "serviceSeconds"),
            ("interarrival_seconds", "interarrivalSeconds"),
        ):
            value = facts.get(key)
            if isinstance(value, int | float) and math.isfinite(value):
                status[field] = round(float(value), 1)
        forecast = {}
        for key, field in (
            ("verdict", "verdict"),
            ("utilization", "utilization"),
            ("drain_seconds", "drainSeconds"),
            ("recommended_parallelism", "recommendedParallelism"),
        ):
            value = facts.get(key)
            if isinstance(value, str) or (isinstance(value, int | float) and math.isfinite(value)):
                forecast[field] = round(value, 3) if isinstance(value, float) else value
        if forecast:
            status["forecast"] = forecast
        status["conditions"] = self._conditions(facts, obj)
        return status

    def _conditions(self, facts: dict, obj: dict) -> list[dict]:
        before = {c.get("type"): c for c in ((obj.get("status") or {}).get("conditions") or [])}
        now = rfc3339(time.time())
        made = obj["metadata"].get("creationTimestamp") or now  # a condition never true yet
        paused = facts.get("paused_since")
        stuck = self.stuck() or {}
        pods = ", ".join(f"{n} {reason}" for reason, n in sorted(stuck.items()))
        states = {
            "Paused": (paused is not None, "Paused", "nothing new starts; running work finishes"),
            "Stuck": (bool(stuck), "PodsCannotStart", f"pods that cannot start: {pods}"),
            "StorageFault": (bool(facts.get("held")), "CannotRecord", facts.get("held") or ""),
            "SourceUnavailable": (
                bool(facts.get("source_down")),
                "SourceUnavailable",
                facts.get("source_down") or "",
            ),
        }
        out = []
        for kind in CONDITIONS:
            on, reason, message = states[kind]
            status = "True" if on else "False"
            earlier = before.get(kind)
            since = now if on else made
            if kind == "Paused" and on:
                since = rfc3339(paused)
            elif earlier is not None and earlier.get("status") == status:
                since = earlier.get("lastTransitionTime") or since
            condition = {"type": kind, "status": status, "lastTransitionTime": since}
            if on:
                condition.update(reason=reason, message=message[:1000])
            out.append(condition)
        return _summary(out, facts, before, now) + out


def _summary(detailed: list[dict], facts: dict, before: dict, now: str) -> list[dict]:
    """Ready (a manager of the queue leads and writes this), Progressing (items wait or run)
    and Degraded (any of Stuck, StorageFault, SourceUnavailable), from the detailed ones."""
    counts = facts.get("counts") or {}
    busy = int(counts.get("pending", 0)) + int(counts.get("running", 0))
    troubles = [c for c in detailed if c["type"] != "Paused" and c["status"] == "True"]
    paused = any(c["type"] == "Paused" and c["status"] == "True" for c in detailed)
    states = {
        "Ready": (True, "Running", "the queue's manager leads and dispatches"),
        "Progressing": (
            busy > 0 and not paused,
            "ItemsInFlight" if busy and not paused else ("Paused" if paused else "Idle"),
            f"{counts.get('pending', 0)} waiting, {counts.get('running', 0)} running",
        ),
        "Degraded": (
            bool(troubles),
            troubles[0]["reason"] if troubles else "AsExpected",
            "; ".join(c.get("message", "") for c in troubles),
        ),
    }
    return summary_conditions(states, before, now)


def summary_conditions(states: dict, before: dict, now: str) -> list[dict]:
    """Conditions from {type: (on, reason, message)}, each keeping its lastTransitionTime from
    `before` (by type) while its status stays. Shared with the operator, which writes the same
    three while no manager of the queue does (`manager.operator.conditions`)."""
    out = []
    for kind, (on, reason, message) in states.items():
        status = "True" if on else "False"
        earlier = before.get(kind)
        since = now
        if earlier is not None and earlier.get("status") == status:
            since = earlier.get("lastTransitionTime") or now
        out.append({"type": kind, "status": status, "lastTransitionTime": since,
                    "reason": reason, "message": message[:1000]})  # fmt: skip
    return out


def _answer(status: dict | None) -> tuple:
    """What a status says back to its spec: the generation seen, the parallelism in force,
    whether it is paused."""
    if not status:
        return ()
    paused = [c.get("status") for c in status.get("conditions") or [] if c["type"] == "Paused"]
    return status.get("observedGeneration"), status.get("replicas"), paused


def group_rules_of(obj: dict | None) -> dict | None:
    """The group rules a WorkQueue's spec asks for (`manager.tenancy.rules.asked_rules`)."""
    spec = (obj or {}).get("spec") or {}
    rules = {key: spec[key] for key in ("limits", "rates") if isinstance(spec.get(key), list)}
    return rules or None
