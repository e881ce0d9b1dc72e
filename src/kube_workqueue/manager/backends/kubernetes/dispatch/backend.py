"""The Kubernetes backend: one Job plus one ConfigMap per item (Burns' work-queue pattern: the
item's data reaches the worker as a file, here a ConfigMap mounted as WORK_ITEM_FILE).

run(name, data, attempt) - called by a reconciler worker holding a capacity slot:
  1. the Job, deterministically named, mounting the item's ConfigMap as WORK_ITEM_FILE. 409
     AlreadyExists means a rival manager (or this one before a restart) dispatched it: counted
     in workqueue_dispatch_conflicts_total, and its outcome is awaited like our own;
  2. the ConfigMap with the item's data, created owned by the Job (ownerReferences: deleting
     the Job deletes it) - no second write to set the owner. The pod waits for it to mount, as
     a kubelet waits for any ConfigMap volume;
  3. wait until the Job's outcome is in the durable record (record.py) - whoever wrote it: a
     rival manager may record it and remove the finalizer before this manager's cache sees the
     Job finish, so a finished Job without the finalizer sends us to read the record afresh
     (`outcome.py`).
A crash between 1 and 2 leaves a Job whose pod cannot mount its data: the next manager adopts
the running Job and writes its ConfigMap (`adopted.py`); `orphans.py` deletes such a Job (it
never ran) once it is a minute old when nobody could.

Cancel - the item left the source (--cancel-removed). A run's `Cancel` set before its Job
was created: none is created. Set while the run awaits its Job: the Job is read afresh and,
if it still runs, its finalizer removed and the Job deleted with a uid precondition (so never a
newer Job of that name); the run returns cancelled. A Job found finished keeps its outcome.
`cancel_elsewhere(name)` does the same to a Job another manager left running.

Completion - recording the outcome, removing the finalizer, history limits, failing stuck
items - is the completion controller's (`settler.py`): the Job cache's handler only enqueues.

Writes per item on the happy path: the Job, its ConfigMap, the record entry (one update of its
shard), the finalizer's removal - four. Events are posted only for failures.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from ....ports import Cancel, Outcome
from ..client.api import KubeApi, KubeError
from ..client.cache import ClusterCache, finished
from ..manifests import batch_objects as bo
from ..manifests import objects as ko
from ..records.batch_record import BatchRecords
from ..records.record import RecordStore
from .adopted import Adoptions
from .batches import BatchRunner, create_job, unfinished_members
from .orphans import ORPHAN_AGE_SECONDS, clean_orphans
from .outcome import AwaitsOutcome
from .settler import CompletionController

log = logging.getLogger(__name__)


class KubernetesBackend(AwaitsOutcome):
    work_outlives_manager = True  # its Jobs run on when it stops (a shared ledger keeps them)

    def __init__(
        self,
        api: KubeApi,
        queue: str,
        pod: ko.PodOptions,
        cache: ClusterCache,
        record: RecordStore,
        *,
        keep_succeeded: int | None = None,
        keep_failed: int | None = None,
        registry=None,
        batches: BatchRecords | None = None,
        batch_size: int = 1,
        batch_wait: float = 1.0,
        max_attempts: int = 1,
        attempts_from_ledger: bool = False,
    ) -> None:
        """`batches`: the record of the queue's batches (always given by `parts.setup`: a
        batch from an earlier run is recorded whatever this manager's `batch_size`); with
        `batch_size` > 1 this backend dispatches batches (`batches.py`).
        `attempts_from_ledger`: a shared ledger numbers the attempts (`manager.fleet`), and
        what this cluster's record holds at that number or later is from before a retry
        there - it goes before the attempt is dispatched."""
        self.api = api
        self.batches = batches
        self.batch_size = batch_size
        self.batch_wait = batch_wait
        self.queue = queue
        self.pod = pod
        self.cache = cache
        self.record = record
        self.keep_succeeded = keep_succeeded
        self.keep_failed = keep_failed
        self.attempts_from_ledger = attempts_from_ledger
        self._stopping = threading.Event()
        self._in_flight: set[str] = set()  # Job names a run() of this manager is about
        self._adoptions = Adoptions()  # running Jobs handed over at start (`adopted.py`)
        self._ending = threading.Lock()  # one `_end_job` at a time: one delete per Job
        self._on_change: list[Callable[[], None]] = []  # told after each cache change
        self.metrics = _Metrics(registry, cache) if registry is not None else None
        self.completions = CompletionController(
            api,
            queue,
            cache,
            record,
            keep_succeeded=keep_succeeded,
            keep_failed=keep_failed,
            on_recorded=self.metrics.recorded if self.metrics else None,
            batches=batches,
            max_attempts=max_attempts,
        )
        self.batcher = None
        if batches is not None:  # (batch_size 1 still adopts a claim a crash left)
            self.batcher = BatchRunner(
                api, queue, pod, cache, batches, self.completions,
                size=batch_size, max_attempts=max_attempts, stopping=self._stopping,
                in_flight=self._in_flight, metrics=self.metrics,
            )  # fmt: skip

    # -- the backend hook ------------------------------------------------------------------

    def log_path(self, name: str) -> str:
        if self.batch_size > 1:
            return (
                f"kubectl logs -l {ko.QUEUE_LABEL}={self.queue},{bo.BATCH_LABEL} "
                "(its batch's pods; `workqueue status NAME` names its batch and index)"
            )
        return f"kubectl logs -l {ko.item_selector(self.queue, name)} (the item's Jobs)"

    def on_change(self, callback: Callable[[], None]) -> None:
        """`callback()` after every change of the queue's Jobs (the capacity re-counts)."""
        self._on_change.append(callback)

    # -- adoption (`adopted.py`) ----------------------------------------------------------

    adopted_needs_data = True  # the adopter reads the item from the source for run()

    def adopted(self) -> list[tuple[str, int]]:
        """The items whose one-item Job runs with no run() of this manager awaiting it, and
        the members of batches not recorded yet."""
        units = self._adoptions.offer(self.cache)
        if self.batcher is not None:
            units += self._adoptions.offer_members(self.batcher.adopted.take())
        return units

    def run(self, name: str, data: dict[str, Any], attempt: int, cancel: Cancel) -> Outcome:
        if self.batcher is not None:
            seq = self._adoptions.take_member(name)
            if seq is not None:  # adopted in a batch found unrecorded: its record tells
                return self.batcher.adopted.await_member(name, seq)
        version = data.get("version")
        job_name = ko.object_name(self.queue, name, version)
        adopted = self._adoptions.take(name)
        # an adopted Job whose data is not at hand (the item left the source, or changed
        # since) is awaited as it is, never given guessed data; so is one already cancelled
        # (its Job is ended by the wait, not left running by a dispatch that never began)
        as_is = adopted is not None and (not data or adopted != job_name or cancel.is_set())
        if as_is:
            job_name = adopted
        where = f"job/{job_name} (kubectl logs)"
        if self._stopping.is_set():
            return Outcome(False, interrupted=True, log_path=where)
        if not as_is:
            try:
                config_map = ko.config_map(self.queue, self.api.namespace, name, data)
            except ko.ItemTooLarge as exc:
                return Outcome(False, error=str(exc), log_path=where)
            if adopted is None and self.attempts_from_ledger:
                self._forget_older_run(name, attempt)
        self._in_flight.add(job_name)
        forget = cancel.on_set(self._wake)  # the wait below looks at the cancel again
        try:
            if as_is:
                return self._await_adopted(name, job_name, where, cancel)
            return self._dispatch(name, job_name, config_map, attempt, where, version, cancel)
        finally:
            forget()
            self._in_flight.discard(job_name)

    def _await_adopted(self, name: str, job_name: str, where: str, cancel: Cancel) -> Outcome:
        job = self.cache.get(job_name) or self.api.find("jobs", job_name)
        if job is None:  # it went between the handing over and now: recorded by then
            job = {"metadata": {"name": job_name, "annotations": {}}}
        return self._await(name, job, where, cancel)

    def _wake(self) -> None:
        with self.cache.changed:
            self.cache.changed.notify_all()

    # -- batches (`batches.py`): the dispatcher's hooks when batch_size > 1 -------------------

    batch_bytes = bo.MAX_BATCH_BYTES

    def item_bytes(self, name: str, data: dict, attempt: int) -> int:
        return self.batcher.item_bytes(name, data, attempt)

    def run_batch(self, runs: list, report) -> None:
        self.batcher.run_batch(runs, report)

    def cancel_elsewhere(self, name: str) -> bool:
        """End the Job of `name` another manager left running, of whatever version (see the
        module docstring). False when there is none, or it has finished (its outcome stands)."""
        running = [j for j in self.cache.indexed(ko.item_hash(self.queue, name)) if not finished(j)]
        job = ko.newest(running)
        if job is None:
            return False
        ended = self._end_job(job["metadata"]["name"])
        self._wake()
        return bool(ended)

    def _end_job(self, job_name: str) -> bool | None:
        """Delete the Job if, read afresh, it still runs: True. False when it has finished;
        None when there is none (or it is being deleted already)."""
        with self._ending:
            fresh = self.api.find("jobs", job_name)
            if fresh is None or fresh["metadata"].get("deletionTimestamp"):
                return None
            if finished(fresh):
                return False
            self.completions.remove_finalizer(job_name)
            self.api.remove("jobs", job_name, fresh["metadata"]["uid"])
            return True

    def _dispatch(self, name, job_name, config_map, attempt, where, version, cancel) -> Outcome:
        self._clear_previous_attempt(job_name)
        self._clear_stale_data(job_name)
        if cancel.is_set():  # asked before its Job existed: never create it
            return self._cancelled_outcome(where)
        body = ko.job(self.queue, self.api.namespace, name, attempt, self.pod, version)
        job = create_job(self.api, body, self.metrics)
        if job is None:
            log.info("%s: already dispatched (409 AlreadyExists); awaiting its outcome", name)
            job = self.api.get("jobs", job_name)
        give_item_data(self.api, job, config_map)
        return self._await(name, job, where, cancel)

    def _clear_stale_data(self, job_name: str) -> None:
        """A ConfigMap of this name that no Job owns, with no Job of this name, is stale (an
        older manager's crash between its two creates): a pod must never mount it, so it goes
        before the Job is created. A read, and a delete only in that rare case."""
        if self.cache.get(job_name) is not None:
            return
        stale = self.api.find("configmaps", job_name)
        if stale is None or stale["metadata"].get("ownerReferences"):
            return
        if self.api.find("jobs", job_name) is None:
            self.api.remove("configmaps", job_name, stale["metadata"]["uid"])

    def _forget_older_run(self, name: str, attempt: int) -> None:
        """A shared ledger's attempt `attempt` is new: an entry of this cluster's record at
        that number or later (and its finished Job) is from before a `workqueue retry`, and
        would be taken for this attempt's outcome."""
        entry = self.record.entry(ko.item_hash(self.queue, name))
        if entry is not None and entry.attempts >= attempt:
            self.retry(name)

    def _clear_previous_attempt(self, job_name: str) -> None:
        """A retry reuses the deterministic name: the failed Job (already recorded) goes
        first, re-read from the API server and deleted with a uid precondition."""
        cached = self.cache.get(job_name)
        if cached is None or finished(cached) != "Failed":
            return
        self.completions.release_and_delete(job_name)
        self.cache.wait_for(lambda: self.cache.get(job_name) is None, timeout=60)

    def read_jobs(self, name: str) -> list[dict]:
        """The item's Jobs (one per version it ran at) as the API server has them now."""
        jobs, _ = self.api.list("jobs", ko.item_selector(self.queue, name))
        return jobs

    def read_job(self, name: str) -> dict | None:
        """The item's newest Job as the API server has it now, or None."""
        return ko.newest(self.read_jobs(name))

    def retry(self, name: str) -> bool:
        """Run a finished item again on purpose: out of the record, its newest Job deleted.
        False when the item is still running (nothing to retry)."""
        item_hash = ko.item_hash(self.queue, name)
        found = self.batches.lookup(item_hash) if self.batches is not None else None
        if found is not None:  # its batch speaks for it: it lets go of it, never of siblings
            if found.state == "running":
                return False
            self.batches.release(item_hash)
            self.record.remove(item_hash)
            return True
        fresh = self.read_job(name)
        if fresh is not None and finished(fresh) is None:
            return False
        if fresh is not None:
            self.completions.release_and_delete(fresh["metadata"]["name"])
        self.record.remove(item_hash)
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
            unfinished_members(j) if bo.batch_of(j) is not None else 1
            for j in self.cache.items()
            if finished(j) is None and j["metadata"]["name"] not in self._in_flight
        )

    def on_job_change(self, kind: str, job: dict) -> None:
        """The Job cache's handler: re-count capacity, and hand finished Jobs to the
        completion controller's queue. Nothing here calls the API."""
        for callback in self._on_change:
            callback()
        self.completions.on_job_change(kind, job)

    # -- housekeeping ----------------------------------------------------------------------

    def clean_orphans(self, min_age: float = ORPHAN_AGE_SECONDS) -> int:
        """What a crash between an item's Job and its ConfigMap left (`orphans.py`)."""
        return clean_orphans(self.api, self.queue, self.cache, self.completions, min_age)


def give_item_data(api: KubeApi, job: dict, config_map: dict) -> None:
    """The item's ConfigMap, created owned by the created `job` (it carries its uid). One
    already there is a rival's (or ours before a crash): left alone when it belongs to this
    Job, else given this Job and today's data."""
    config_map["metadata"]["ownerReferences"] = [ko.owner_reference(job)]
    try:
        api.create("configmaps", config_map)
    except KubeError as exc:
        if exc.reason != "AlreadyExists":
            raise
        name = config_map["metadata"]["name"]
        current = api.find("configmaps", name)
        owners = (current or {"metadata": {}})["metadata"].get("ownerReferences") or []
        if current is not None and not any(o.get("uid") == job["metadata"]["uid"] for o in owners):
            # an earlier attempt's, not yet collected: today's data, this Job as owner
            current["metadata"]["ownerReferences"] = [ko.owner_reference(job)]
            current["data"] = config_map["data"]
            api.replace("configmaps", name, current)  # guarded by its version


class _Metrics:
    def __init__(self, registry, cache: ClusterCache) -> None:
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

    def recorded(self, state: str, failure: str) -> None:
        self.completions.labels(state, failure).inc()
