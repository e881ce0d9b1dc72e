"""The Kubernetes backend: one Job plus one ConfigMap per item (Burns' work-queue pattern: the
item's data reaches the worker as a file, here a ConfigMap mounted as WORK_ITEM_FILE).

run(name, data, attempt) - called by a reconciler worker holding a capacity slot:
  1. the ConfigMap with the item's data (409 AlreadyExists with no Job: left by a crashed
     pass, so its data is refreshed; with a Job: a rival's, left alone);
  2. the Job, deterministically named, mounting it as WORK_ITEM_FILE. 409 AlreadyExists means
     a rival manager (or this one before a restart) dispatched it: counted in
     workqueue_dispatch_conflicts_total, and its outcome is awaited like our own;
  3. the ConfigMap is made owned by the Job (ownerReferences), so deleting the Job deletes it;
  4. wait until the Job's outcome is in the durable record (record.py) - whoever wrote it: a
     rival manager may record it and remove the finalizer before this manager's cache sees the
     Job finish, so a finished Job without the finalizer sends us to read the record afresh.
A crash between steps leaves nothing that blocks the item: the next pass finds no Job and
repeats them (1 tolerates the existing ConfigMap); ConfigMaps nobody owns whose Job never came
are removed by `clean_orphans`.

Completion is handled in one place, `on_job_change`, whatever dispatched the Job: a finished
Job carrying the record finalizer is recorded, an Event is posted on it, and only then is the
finalizer removed (a JSON patch guarded by the resourceVersion just re-read from the API server,
not the cache). History limits then delete the oldest recorded Jobs beyond --keep-succeeded /
--keep-failed - each re-read from the API server first and deleted with a uid precondition.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from ...ports import Outcome
from . import objects as ko
from .api import KubeApi, KubeError
from .cache import JobCache, finished
from .record import RecordStore, job_state

log = logging.getLogger(__name__)

ORPHAN_AGE_SECONDS = 60.0
RECORD_LOOKS = 10  # fresh reads of the record for a Job that finished elsewhere


class KubernetesBackend:
    def __init__(
        self,
        api: KubeApi,
        queue: str,
        pod: ko.PodOptions,
        cache: JobCache,
        record: RecordStore,
        *,
        keep_succeeded: int | None = None,
        keep_failed: int | None = None,
        registry=None,
    ) -> None:
        self.api = api
        self.queue = queue
        self.pod = pod
        self.cache = cache
        self.record = record
        self.keep_succeeded = keep_succeeded
        self.keep_failed = keep_failed
        self._stopping = threading.Event()
        self._in_flight: set[str] = set()
        self._on_change: list[Callable[[], None]] = []  # told after each cache change
        self._handler_lock = threading.RLock()  # _release_and_delete may re-enter
        self._stuck: dict[str, str] = {}  # Job name -> why it was failed as stuck
        self.metrics = _Metrics(registry, cache) if registry is not None else None

    # -- the backend hook ------------------------------------------------------------------

    def log_path(self, name: str) -> str:
        return f"job/{ko.object_name(self.queue, name)} (kubectl logs)"

    def on_change(self, callback: Callable[[], None]) -> None:
        """`callback()` after every change of the queue's Jobs (the capacity re-counts)."""
        self._on_change.append(callback)

    def run(self, name: str, data: dict[str, Any], attempt: int) -> Outcome:
        job_name = ko.object_name(self.queue, name)
        where = self.log_path(name)
        if self._stopping.is_set():
            return Outcome(False, interrupted=True, log_path=where)
        try:
            config_map = ko.config_map(self.queue, self.api.namespace, name, data)
        except ko.ItemTooLarge as exc:
            return Outcome(False, error=str(exc), log_path=where)
        self._in_flight.add(job_name)
        try:
            return self._dispatch(name, job_name, config_map, attempt, where)
        finally:
            self._in_flight.discard(job_name)

    def _dispatch(self, name, job_name, config_map, attempt, where) -> Outcome:
        self._clear_previous_attempt(job_name)
        try:
            self.api.create("configmaps", config_map)
        except KubeError as exc:
            if exc.reason != "AlreadyExists":
                raise
            if self.cache.get(job_name) is None:  # left by a crash: give it today's data
                self.api.patch("configmaps", job_name, {"data": config_map["data"]})
        body = ko.job(self.queue, self.api.namespace, name, attempt, self.pod)
        try:
            job = self.api.create("jobs", body)
            if self.metrics:
                self.metrics.created.inc()
            self.post_event(job, "Dispatched", f"item {name!r}, attempt {attempt}")
        except KubeError as exc:
            if exc.reason != "AlreadyExists":
                raise
            if self.metrics:
                self.metrics.conflicts.inc()
            log.info("%s: already dispatched (409 AlreadyExists); awaiting its outcome", name)
            job = self.api.get("jobs", job_name)
        self._own(job_name, job)
        return self._await(name, job, where)

    def _own(self, job_name: str, job: dict) -> None:
        try:
            self.api.patch(
                "configmaps", job_name, {"metadata": {"ownerReferences": [ko.owner_reference(job)]}}
            )
        except KubeError as exc:
            if exc.reason != "NotFound":
                raise

    def _await(self, name: str, job: dict, where: str) -> Outcome:
        item_hash = ko.item_hash(self.queue, name)
        attempt = int(job["metadata"].get("annotations", {}).get(ko.ATTEMPT_ANNOTATION) or 1)

        job_name = job["metadata"]["name"]
        seen = {"job": False}

        def recorded() -> bool:
            entry = self.record.get(item_hash)
            return entry is not None and entry[1] >= attempt

        def settled_elsewhere() -> bool:
            """Recorded by someone else (a rival manager removed the finalizer first, which it
            does only after writing the record), or gone after we saw it."""
            cached = self.cache.get(job_name)
            if cached is None:
                return seen["job"]
            seen["job"] = True
            finalizers = cached["metadata"].get("finalizers") or []
            return finished(cached) is not None and ko.RECORD_FINALIZER not in finalizers

        for _ in range(RECORD_LOOKS):
            self.cache.wait_for(
                lambda: recorded() or self._stopping.is_set() or settled_elsewhere()
            )
            if recorded() or self._stopping.is_set():
                break
            self.record.reload(item_hash)  # the outcome is in the record: read it afresh
            if recorded():
                break
            if self.cache.get(job_name) is None:
                return Outcome(
                    False, error="its Job was deleted before its outcome was recorded",
                    log_path=where,
                )  # fmt: skip
            self._stopping.wait(1.0)  # a rival may be mid-write: look again shortly
        else:  # finished, its finalizer gone, and no record of it: someone else removed it
            return Outcome(False, error="its Job finished but nobody recorded it", log_path=where)
        if not recorded():
            return Outcome(False, interrupted=True, log_path=where)
        state, _ = self.record.get(item_hash)
        if state == "succeeded":
            return Outcome(True, exit_code=0, log_path=where)
        stuck = self._stuck.pop(job_name, None)
        if stuck is not None:
            return Outcome(False, error=stuck, log_path=where)
        return Outcome(False, exit_code=1, error="Job failed", log_path=where)

    def fail_stuck(self, job: dict, why: str) -> None:
        """Fail the item of a Job whose pod cannot start (`stuck.py`), freeing its slot: the
        outcome into the record first, a Warning Event, then the finalizer removed and the Job
        deleted - re-read from the API server and deleted with a uid precondition."""
        job_name = job["metadata"]["name"]
        fresh = self._read("jobs", job_name)
        if fresh is None or finished(fresh) or fresh["metadata"].get("deletionTimestamp"):
            return
        item = (fresh["metadata"].get("annotations") or {}).get(ko.ITEM_ANNOTATION)
        if item is None:
            return
        _, attempts = job_state(fresh)
        self._stuck[job_name] = why
        with self._handler_lock:
            self.record.put(ko.item_hash(self.queue, item), "failed", attempts)
            if self.metrics:
                self.metrics.completions.labels("failed", "Stuck").inc()
            self.post_event(fresh, "Stuck", f"item {item!r}: {why}", warning=True)
            self._remove_finalizer(job_name)
            try:
                self.api.delete("jobs", job_name, uid=fresh["metadata"]["uid"])
            except KubeError as exc:
                if exc.reason not in ("NotFound", "Conflict"):
                    raise
        with self.cache.changed:
            self.cache.changed.notify_all()

    def _clear_previous_attempt(self, job_name: str) -> None:
        """A retry reuses the deterministic name: the failed Job (already recorded) goes
        first, re-read from the API server and deleted with a uid precondition."""
        cached = self.cache.get(job_name)
        if cached is None or finished(cached) != "Failed":
            return
        self._release_and_delete(job_name)
        self.cache.wait_for(lambda: self.cache.get(job_name) is None, timeout=60)

    def read_job(self, name: str) -> dict | None:
        """The item's Job as the API server has it now, or None."""
        return self._read("jobs", ko.object_name(self.queue, name))

    def retry(self, name: str) -> bool:
        """Run a finished item again on purpose: out of the record, its Job deleted. False
        when the item is still running (nothing to retry)."""
        job_name = ko.object_name(self.queue, name)
        fresh = self._read("jobs", job_name)
        if fresh is not None and finished(fresh) is None:
            return False
        self._release_and_delete(job_name)
        self.record.remove(ko.item_hash(self.queue, name))
        return True

    def shutdown(self, grace: float) -> None:
        """Stop waiting for Jobs: they run on in the cluster, and whoever manages the queue
        next records them (their finalizer keeps them until then)."""
        self._stopping.set()
        with self.cache.changed:
            self.cache.changed.notify_all()

    # -- completion ------------------------------------------------------------------------

    def others_running(self) -> int:
        """Unfinished Jobs of the queue that no run() of this manager is waiting for (from a
        rival manager, or from before a restart): they count against the parallelism too."""
        return sum(
            1
            for j in self.cache.items()
            if finished(j) is None and j["metadata"]["name"] not in self._in_flight
        )

    def on_job_change(self, kind: str, job: dict) -> None:
        """Called by the cache for every change: record finished Jobs, then let them go."""
        for callback in self._on_change:
            callback()
        if kind == "DELETED":
            return
        outcome = finished(job)
        finalizers = job["metadata"].get("finalizers") or []
        if outcome is None or ko.RECORD_FINALIZER not in finalizers:
            return
        with self._handler_lock:
            annotations = job["metadata"].get("annotations") or {}
            item = annotations.get(ko.ITEM_ANNOTATION)
            if item is None:
                return
            state, attempts = job_state(job)
            self.record.put(ko.item_hash(self.queue, item), state, attempts)
            reason = "Completed" if outcome == "Complete" else "Failed"
            if self.metrics:
                failure = next(
                    (
                        c.get("reason") or "Failed"
                        for c in (job.get("status") or {}).get("conditions") or []
                        if c.get("type") == "Failed"
                    ),
                    "",
                )
                self.metrics.completions.labels(state, failure).inc()
            self.post_event(
                job,
                reason,
                f"item {item!r}: {state} after attempt {attempts}",
                warning=outcome != "Complete",
            )
            self._remove_finalizer(job["metadata"]["name"])
            with self.cache.changed:
                self.cache.changed.notify_all()
            self._enforce_history()

    def _remove_finalizer(self, job_name: str) -> None:
        for _ in range(10):
            fresh = self._read("jobs", job_name)
            finalizers = (fresh or {"metadata": {}})["metadata"].get("finalizers") or []
            if ko.RECORD_FINALIZER not in finalizers:
                return
            index = finalizers.index(ko.RECORD_FINALIZER)
            try:
                self.api.patch(
                    "jobs",
                    job_name,
                    [
                        {
                            "op": "test",
                            "path": "/metadata/resourceVersion",
                            "value": fresh["metadata"]["resourceVersion"],
                        },
                        {"op": "remove", "path": f"/metadata/finalizers/{index}"},
                    ],
                )
                return
            except KubeError as exc:
                if exc.status not in (409, 422):
                    raise

    def _read(self, kind: str, name: str) -> dict | None:
        """The object as the API server has it now (never the cache); None when it is gone."""
        try:
            return self.api.get(kind, name)
        except KubeError as exc:
            if exc.reason == "NotFound":
                return None
            raise

    def _release_and_delete(self, job_name: str) -> None:
        fresh = self._read("jobs", job_name)
        if fresh is None:
            return
        if ko.RECORD_FINALIZER in (fresh["metadata"].get("finalizers") or []):
            if finished(fresh) is None:
                return  # never delete unrecorded or running work
            self.on_job_change("MODIFIED", fresh)
        try:
            self.api.delete("jobs", job_name, uid=fresh["metadata"]["uid"])
        except KubeError as exc:
            if exc.reason not in ("NotFound", "Conflict"):
                raise

    def _enforce_history(self) -> None:
        """Keep the newest --keep-succeeded / --keep-failed recorded Jobs; delete the rest."""
        for state, keep in (("succeeded", self.keep_succeeded), ("failed", self.keep_failed)):
            if keep is None:
                continue
            done = [
                j
                for j in self.cache.items()
                if finished(j)
                and job_state(j)[0] == state
                and self._recorded(j)
                and not j["metadata"].get("deletionTimestamp")
            ]
            done.sort(key=lambda j: (j.get("status") or {}).get("completionTime") or "")
            for job in done[: max(0, len(done) - keep)]:
                self._release_and_delete(job["metadata"]["name"])

    def _recorded(self, job: dict) -> bool:
        item = (job["metadata"].get("annotations") or {}).get(ko.ITEM_ANNOTATION)
        return item is not None and self.record.get(ko.item_hash(self.queue, item)) is not None

    # -- housekeeping ----------------------------------------------------------------------

    def clean_orphans(self, min_age: float = ORPHAN_AGE_SECONDS) -> int:
        """Delete the queue's item ConfigMaps that no Job owns and whose Job does not exist
        (a crash between the two creates, for an item that then left the source)."""
        items, _ = self.api.list(
            "configmaps", f"{ko.QUEUE_LABEL}={self.queue},{ko.ITEM_HASH_LABEL}"
        )
        removed = 0
        for cm in items:
            meta = cm["metadata"]
            if meta.get("ownerReferences") or self.cache.get(meta["name"]) is not None:
                continue
            if _age(meta.get("creationTimestamp")) < min_age:
                continue
            fresh = self._read("configmaps", meta["name"])
            if fresh is None or fresh["metadata"].get("ownerReferences"):
                continue
            if self._read("jobs", meta["name"]) is not None:
                continue  # its Job exists after all
            try:
                self.api.delete("configmaps", meta["name"], uid=meta["uid"])
                removed += 1
            except KubeError as exc:
                if exc.reason not in ("NotFound", "Conflict"):
                    raise
        return removed

    def post_event(self, job: dict, reason: str, message: str, *, warning: bool = False) -> None:
        meta = job["metadata"]
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{meta['name']}.", "namespace": self.api.namespace},
            "involvedObject": {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "name": meta["name"],
                "namespace": self.api.namespace,
                "uid": meta.get("uid"),
            },
            "reason": reason,
            "message": message,
            "type": "Warning" if warning else "Normal",
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
            "source": {"component": "workqueue-manager"},
            "reportingComponent": "workqueue-manager",
        }
        try:
            self.api.create("events", event)
        except KubeError as exc:  # an event is a courtesy: never fail the item for it
            log.warning("could not post event %s on %s: %s", reason, meta["name"], exc)


def _age(timestamp: str | None) -> float:
    if not timestamp:
        return float("inf")
    from .leader import parse_time

    return time.time() - parse_time(timestamp)


class _Metrics:
    def __init__(self, registry, cache: JobCache) -> None:
        from prometheus_client import Counter, Gauge

        self.created = Counter(
            "workqueue_jobs_created", "Jobs created by this manager.", registry=registry
        )
        self.conflicts = Counter(
            "workqueue_dispatch_conflicts",
            "Job creates answered 409 AlreadyExists (dispatched elsewhere).",
            registry=registry,
        )
        self.completions = Counter(
            "workqueue_job_completions",
            "Finished Jobs recorded, by result and failure reason.",
            ["result", "reason"],
            registry=registry,
        )
        cache_size = Gauge(
            "workqueue_job_cache_size", "Jobs in the manager's cache.", registry=registry
        )
        cache_size.set_function(lambda: len(cache))
