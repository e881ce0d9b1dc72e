"""Completion, as a client-go controller does it: handlers only enqueue; a worker reconciles.

The Job cache's change handler (and the stuck-pod detector) never call the API: they put the
Job's name on this controller's rate-limited workqueue (the project's own client-go workqueue:
one entry per name however many changes come). One worker takes a name and settles that Job:

  * finished and still carrying the record finalizer: its outcome goes into the durable record,
    a Warning Event is posted when it failed, and only then is the finalizer removed (a JSON
    patch guarded by the resourceVersion just read from the API server, never the cache);
    history limits then delete the oldest recorded Jobs beyond --keep-succeeded/--keep-failed;
  * asked to fail as stuck (`request_fail`): re-read; if still unfinished, the item is recorded
    failed, a Warning Event says why, the finalizer goes and the Job is deleted with a uid
    precondition - its slot is free. A batch's Job the same way, unless a pod of it is ready
    after all: its finished members keep their outcomes, the unfinished ones are recorded
    failed, and every slot it held is free.

Any error (a 500 or 429 storm outlasting the API client's own retries, a conflict) puts the name
back with the per-item exponential backoff, so no transient failure leaves a Job unrecorded;
success forgets its backoff. The cache replays every Job to the handler each resync period (as
an informer's resync does), so even a change that was never delivered is settled.

Invariants: a Job's finalizer is removed only after its outcome is in the record; nothing
unfinished is deleted unless it is being failed as stuck, and then only after recording.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from ....workqueue import RateLimitingQueue
from ....workqueue.rate_limiters import ItemExponentialFailureRateLimiter
from ..client.api import KubeApi, KubeError
from ..client.cache import ClusterCache, finished
from ..manifests import batch_objects as bo
from ..manifests import objects as ko
from ..manifests.pods import completion_index
from ..records.ledger import failed_fast, job_state
from ..records.record import RecordStore

log = logging.getLogger(__name__)


class CompletionController:
    def __init__(
        self,
        api: KubeApi,
        queue: str,
        cache: ClusterCache,
        record: RecordStore,
        *,
        keep_succeeded: int | None = None,
        keep_failed: int | None = None,
        on_recorded: Callable[[str, str], None] | None = None,
        backoff: tuple[float, float] = (0.05, 30.0),
        batches=None,
        max_attempts: int = 1,
    ) -> None:
        """`on_recorded(state, failure_reason)` after each outcome recorded (metrics), once
        per item of a batch too. `batches`: the record of batches (`batch_record`), when the
        queue dispatches batches; `max_attempts` what each of their items was given."""
        self.batches = batches
        self.max_attempts = max_attempts
        self.api = api
        self.queue = queue
        self.cache = cache
        self.record = record
        self.keep_succeeded = keep_succeeded
        self.keep_failed = keep_failed
        self.on_recorded = on_recorded
        self.work = RateLimitingQueue(
            "completions", rate_limiter=ItemExponentialFailureRateLimiter(*backoff)
        )
        # Job name -> why it is to be failed as stuck (set by request_fail, read by the worker
        # and, once recorded, by the dispatcher awaiting that Job's outcome)
        self.stuck: dict[str, str] = {}
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="completions", daemon=True)

    def start(self) -> CompletionController:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.work.shut_down()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=10)

    # -- what handlers may do: enqueue -----------------------------------------------------

    def on_job_change(self, kind: str, job: dict) -> None:
        """The cache's handler: a finished Job still carrying the finalizer needs settling."""
        if kind == "DELETED":
            return
        if finished(job) and ko.RECORD_FINALIZER in (job["metadata"].get("finalizers") or []):
            self.work.add(job["metadata"]["name"])

    def request_fail(self, job: dict, why: str) -> None:
        """The stuck-pod detector's handler: fail this Job's item (see the module docstring)."""
        name = job["metadata"]["name"]
        with self._lock:
            self.stuck.setdefault(name, why)
        self.work.add(name)

    # -- the worker ------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            name, shutdown = self.work.get()
            if shutdown:
                return
            try:
                self.settle(name)
            except Exception as exc:
                tries = self.work.num_requeues(name) + 1
                log.warning("%s: could not settle (%s); retry %d with backoff", name, exc, tries)
                self.work.add_rate_limited(name)
            else:
                self.work.forget(name)
            finally:
                self.work.done(name)

    def settle(self, job_name: str) -> None:
        """Record a finished Job, or fail a stuck one; raises on any API error (the caller
        retries)."""
        fresh = self.api.find("jobs", job_name)
        if fresh is None:
            with self._lock:
                self.stuck.pop(job_name, None)
            return
        if finished(fresh):
            if ko.RECORD_FINALIZER in (fresh["metadata"].get("finalizers") or []):
                self._record_any(fresh)
                self.remove_finalizer(job_name)
            with self.cache.changed:
                self.cache.changed.notify_all()
            self._enforce_history()
        elif job_name in self.stuck and not fresh["metadata"].get("deletionTimestamp"):
            self._fail_stuck(fresh, self.stuck[job_name])

    def _record_any(self, job: dict) -> None:
        """A finished Job's outcome into the record: a batch's into its own (`batch_record`)."""
        if bo.batch_of(job) is not None:
            self._record_batch(job)
        else:
            self._record(job)

    def _record_batch(self, job: dict) -> None:
        """Every member's outcome, from the Job's completedIndexes and failedIndexes; the
        attempts each took from its pods, read only when some pod failed (one list)."""
        name = job["metadata"]["name"]
        seq = bo.batch_of(job)
        if self.batches is None or seq is None:
            return
        succeeded, failed, outcomes = self._batch_outcomes(job)
        batch = self.batches.record(seq, outcomes)
        if batch is None:
            return
        states = [batch.state(i) for i in range(batch.size)] if batch.recorded else []
        lost = len(states) - len(succeeded) - len(failed)
        if failed or lost:
            why = f"{len(failed)} of {len(states)} items failed"
            if lost:
                why += f"; {lost} never finished ({_reason(job)})"
            self.post_event(job, "Failed", f"batch {name}: {why}")
        if self.on_recorded:
            for state in states:
                self.on_recorded(state, "" if state == "succeeded" else "FailedIndex")

    def _batch_outcomes(self, job: dict) -> tuple[set[int], set[int], dict]:
        """(succeeded indexes, failed indexes, index -> (state, attempts)) of a batch's Job
        as its status says, the attempts read from its pods when some pod failed."""
        status = job.get("status") or {}
        succeeded = bo.parse_indexes(status.get("completedIndexes"))
        failed = bo.parse_indexes(status.get("failedIndexes"))
        failures: dict[int, int] = {}
        if status.get("failed"):
            name = job["metadata"]["name"]
            pods, _ = self.api.list("pods", f"batch.kubernetes.io/job-name={name}")
            for pod in pods:
                if (pod.get("status") or {}).get("phase") != "Failed" or _disrupted(pod):
                    continue
                index = completion_index(pod)
                if index is not None:
                    failures[index] = failures.get(index, 0) + 1
        outcomes = {i: ("succeeded", failures.get(i, 0) + 1) for i in succeeded}
        outcomes.update({i: ("failed", max(1, failures.get(i, 0))) for i in failed})
        return succeeded, failed, outcomes

    def _record(self, job: dict) -> None:
        annotations = job["metadata"].get("annotations") or {}
        item = annotations.get(ko.ITEM_ANNOTATION)
        if item is None:
            return
        state, attempts = job_state(job)
        self.record.put(
            ko.item_hash(self.queue, item),
            state,
            attempts,
            final=failed_fast(job),
            version=ko.job_version(job),
        )
        failure = ""
        if state != "succeeded":
            failure = next(
                (
                    c.get("reason") or "Failed"
                    for c in (job.get("status") or {}).get("conditions") or []
                    if c.get("type") == "Failed"
                ),
                "Failed",
            )
            self.post_event(job, "Failed", f"item {item!r}: failed after attempt {attempts}")
        if self.on_recorded:
            self.on_recorded(state, failure)

    def _fail_stuck(self, job: dict, why: str) -> None:
        job_name = job["metadata"]["name"]
        seq = bo.batch_of(job)
        if seq is not None:
            if not self._fail_stuck_batch(job, seq, why):
                return
        else:
            item = (job["metadata"].get("annotations") or {}).get(ko.ITEM_ANNOTATION)
            if item is None:
                return
            _, attempts = job_state(job)
            self.record.put(
                ko.item_hash(self.queue, item), "failed", attempts, version=ko.job_version(job)
            )
            if self.on_recorded:
                self.on_recorded("failed", "Stuck")
            self.post_event(job, "Stuck", f"item {item!r}: {why}")
        self.remove_finalizer(job_name)
        self.api.remove("jobs", job_name, job["metadata"]["uid"])
        with self.cache.changed:
            self.cache.changed.notify_all()

    def _fail_stuck_batch(self, job: dict, seq: int, why: str) -> bool:
        """A batch whose unfinished members cannot start: its finished members keep their
        outcomes, the others are recorded failed. False (nothing done) when a pod of it is
        ready after all, or the batch's record is gone."""
        if self.batches is None or ((job.get("status") or {}).get("ready") or 0) > 0:
            with self._lock:
                self.stuck.pop(job["metadata"]["name"], None)
            return False
        succeeded, failed, outcomes = self._batch_outcomes(job)
        batch = self.batches.record(seq, outcomes)  # (an index not in outcomes: failed)
        if batch is None:
            return False
        stuck = batch.size - len(succeeded) - len(failed)
        if self.on_recorded:
            for i in range(batch.size):
                state = batch.state(i)
                failure = "" if state == "succeeded" else "FailedIndex" if i in failed else "Stuck"
                self.on_recorded(state, failure)
        self.post_event(job, "Stuck", f"batch {job['metadata']['name']}: {stuck} items {why}")
        return True

    # -- API steps -------------------------------------------------------------------------

    def remove_finalizer(self, job_name: str) -> None:
        self.api.remove_finalizer("jobs", job_name, ko.RECORD_FINALIZER)

    def release_and_delete(self, job_name: str) -> None:
        """Delete a finished Job: recorded first if it was not yet; never one that runs."""
        fresh = self.api.find("jobs", job_name)
        if fresh is None:
            return
        if ko.RECORD_FINALIZER in (fresh["metadata"].get("finalizers") or []):
            if finished(fresh) is None:
                return  # never delete unrecorded or running work
            self._record_any(fresh)
            self.remove_finalizer(job_name)
        self.api.remove("jobs", job_name, fresh["metadata"]["uid"])

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
                self.release_and_delete(job["metadata"]["name"])

    def _recorded(self, job: dict) -> bool:
        seq = bo.batch_of(job)
        if self.batches is not None and seq is not None:
            batch = self.batches.batch(seq)
            return batch is not None and batch.recorded
        item = (job["metadata"].get("annotations") or {}).get(ko.ITEM_ANNOTATION)
        return item is not None and self.record.get(ko.item_hash(self.queue, item)) is not None

    def post_event(self, job: dict, reason: str, message: str) -> None:
        """A Warning Event on the Job (Events are for what a person acts on: failures)."""
        meta = job["metadata"]
        involved = {"apiVersion": "batch/v1", "kind": "Job", "name": meta["name"],
                    "uid": meta.get("uid")}  # fmt: skip
        event = ko.event(involved, self.api.namespace, reason, message)
        try:
            self.api.create("events", event)
        except KubeError as exc:  # an event is a courtesy: never fail the item for it
            log.warning("could not post event %s on %s: %s", reason, meta["name"], exc)


def _disrupted(pod: dict) -> bool:
    """A pod the cluster ended (DisruptionTarget): its failure is not the item's."""
    return any(
        c.get("type") == "DisruptionTarget" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def _reason(job: dict) -> str:
    for condition in (job.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Failed":
            return condition.get("reason") or "Failed"
    return "the Job ended"
