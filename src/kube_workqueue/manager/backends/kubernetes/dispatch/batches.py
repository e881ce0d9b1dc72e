"""Batches on Kubernetes: up to `--batch-size` items dispatched as one Indexed Job.

`run_batch(runs, report)` - called by the dispatcher's batch worker holding one capacity slot
per run - does for a batch what `KubernetesBackend.run` does for one item:

  1. the claim: the batch's ConfigMap, numbered (`batch_record.BatchRecords.claim`); members a
     rival's batch holds already are not dispatched again: they are awaited until that
     batch's outcome is recorded and reported with it (`_await_theirs`; found by two rival
     `--once` managers that never ended, their items "pending" here while done there);
  2. the Indexed Job named after it (`batch_objects.job`); 409 AlreadyExists means a manager
     restarted after a crash between the two creates made it - it is awaited like our own;
  3. each member's outcome as the Job's status reports it: an index in `completedIndexes`
     succeeded, in `failedIndexes` failed for good (its retries ran inside the Job,
     `backoffLimitPerIndex`), and its slot is given back at once (`report`). The last
     member's report waits until the batch's outcome is in the record (the completion
     controller's, `record_batch`), so a `--once` run never ends with a batch unrecorded.

Service times stay per item: a member's `seconds` run from the Job's creation to the moment
its index was seen to finish (each member has a pod from the start: completions =
parallelism = the batch's size).

Cancel (`--cancel-removed`): a member cancelled before the claim is never in a batch. A member's
index cannot be taken out of a running Indexed Job (Kubernetes has no such operation), so a
cancelled member that runs finishes and its outcome stands; when every unfinished member of a
batch is cancelled the whole Job is ended (recorded cancelled, finalizer removed, deleted).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from ....ports import Outcome
from ..client.api import KubeApi, KubeError
from ..client.cache import ClusterCache, finished
from ..manifests import batch_objects as bo
from ..manifests import objects as ko
from ..records.batch_record import BatchRecords
from .adopted_batches import AdoptedMembers

log = logging.getLogger(__name__)


class BatchRunner:
    def __init__(
        self,
        api: KubeApi,
        queue: str,
        pod: ko.PodOptions,
        cache: ClusterCache,
        batches: BatchRecords,
        completions,
        *,
        size: int,
        max_attempts: int,
        stopping: threading.Event,
        in_flight: set[str],
        metrics=None,
    ) -> None:
        """`in_flight` is the backend's set of Job names a run of this manager awaits."""
        self.api = api
        self.queue = queue
        self.pod = pod
        self.cache = cache
        self.batches = batches
        self.completions = completions
        self.size = size
        self.max_attempts = max_attempts
        # What a failed member's outcome can say without reading its pods (per-index retries
        # run inside the Job; a fail-fast exit code ends the index at once).
        fast = pod.fail_fast_exit_codes
        fail_fast = ", or ended at once by --fail-fast-exit-codes" if fast else ""
        self._failure = f"failed in its batch: retried there up to --max-attempts {max_attempts}"
        self._failure += fail_fast
        self.stopping = stopping
        self.in_flight = in_flight
        self.metrics = metrics
        self.batch_bytes = bo.MAX_BATCH_BYTES  # what a batch's items may take of its ConfigMap
        # the members of batches found unrecorded at start (`adopted_batches.py`)
        self.adopted = AdoptedMembers(api, queue, cache, batches, stopping, in_flight,
                                      self._outcome)  # fmt: skip

    def item_bytes(self, name: str, data: dict, attempt: int) -> int:
        """What one item takes of its batch's ConfigMap (`batch_objects.member_bytes`): the
        dispatcher keeps a batch's sum within `batch_bytes`."""
        return bo.member_bytes(bo.member(name, data, attempt))

    def run_batch(self, runs: list, report: Callable[[object, Outcome], None]) -> None:
        """Run `runs` (each with name, data, attempt, cancel) as one batch; `report(run,
        outcome)` once per run, in this thread (see the module docstring)."""
        where = "a batch"
        told: set[int] = set()  # ids of the runs reported: each is told once

        def once(run, outcome: Outcome) -> None:
            if id(run) not in told:
                told.add(id(run))
                tell_reconciler(run, outcome)

        tell_reconciler, report = report, once
        live = []
        for run in runs:
            if self.stopping.is_set():
                report(run, Outcome(False, interrupted=True, log_path=where))
            elif run.cancel.is_set():
                report(run, _cancelled(where))
            else:
                live.append(run)
        if not live:
            return
        members = [bo.member(r.name, r.data, r.attempt) for r in live]
        try:
            seq, claimed, taken = self.batches.claim(self.api.namespace, members)
        except Exception as exc:
            for run in live:
                report(run, Outcome(False, error=f"cannot claim a batch: {exc}", log_path=where))
            return
        del members  # (written into the batch's ConfigMap: not held while it runs)
        for run in live:
            run.shed()
        by_name = {r.name: r for r in live}
        for m in taken:
            log.info("%s: in a rival manager's batch already; it runs there", m.name)
        mine = [by_name[m.name] for m in claimed]
        theirs = [by_name[m.name] for m in taken]
        del claimed, taken, by_name  # (what waits for the record holds only what it reports)
        try:
            if seq is not None:
                self._run_claimed(seq, mine, report)
        finally:
            self._await_theirs(theirs, report)

    def _run_claimed(self, seq: int, mine: list, report) -> None:
        job_name = bo.batch_name(self.queue, seq)
        where = f"job/{job_name} (kubectl logs {job_name}-<index>-…)"
        self.in_flight.add(job_name)
        try:
            self._create_job(seq, len(mine))
            self._await(job_name, seq, mine, report, where)
        except Exception as exc:
            log.exception("batch %s: the backend failed", job_name)
            for run in mine:  # whatever was not reported yet (`once` skips the others)
                report(run, Outcome(False, error=f"backend error: {exc}", log_path=where))
        finally:
            self.in_flight.discard(job_name)

    def _await_theirs(self, runs: list, report) -> None:
        """Members a rival's batch holds: each reported with the outcome that batch records
        (whoever records it - this manager's completion controller sees the rival's Job too),
        so a `--once` run ends with them, as a one-item run ends with a rival's Job (409);
        `interrupted` only when this manager stops first (they stay pending here)."""
        for run in runs:
            found = self.batches.lookup(ko.item_hash(self.queue, run.name))
            where = (
                "a rival's batch"
                if found is None
                else f"job/{bo.batch_name(self.queue, found.seq)} (a rival's batch)"
            )
            if found is not None and found.state == "running" and self._wait_recorded(found.seq):
                found = self.batches.lookup(ko.item_hash(self.queue, run.name))
            if found is None or found.state == "running":  # stopping, or released meanwhile
                report(run, Outcome(False, interrupted=True, log_path=where))
            else:
                report(run, self._outcome(found.state == "succeeded", None, where, found.state))

    def _create_job(self, seq: int, size: int) -> None:
        body = bo.job(self.queue, self.api.namespace, seq, size, self.pod, self.max_attempts)
        create_job(self.api, body, self.metrics)

    def adopt_unstarted(self) -> int:
        """Create the Job of every claim a crash left without one (the batch's ConfigMap is
        there, its Job never came): the same name, so never a second batch. Returns how many."""
        made = 0
        for seq in self.batches.unrecorded():
            job_name = bo.batch_name(self.queue, seq)
            batch = self.batches.batch(seq)
            if batch is None or self.cache.get(job_name) is not None:
                continue
            if self.api.find("jobs", job_name) is not None:
                continue
            log.warning("batch %s: its Job never came (a crash); creating it", job_name)
            self._create_job(seq, batch.size)
            made += 1
        return made

    def _await(self, job_name: str, seq: int, runs: list, report, where: str) -> None:
        began = time.monotonic()
        reported: set[int] = set()

        seen = {"job": False}

        def tell(index: int, outcome: Outcome) -> None:
            reported.add(index)
            report(runs[index], outcome)

        def wake() -> bool:
            job = self.cache.get(job_name)
            if job is not None:
                seen["job"] = True
            if self.stopping.is_set() or (job is None and seen["job"]) or (job and finished(job)):
                return True
            if job is None:
                return False
            done = _indexes(job)
            tellable = len(runs) - len(reported) > 1  # (the last waits for the Job's end)
            if tellable and any(i not in reported for i in done[0] | done[1]):
                return True
            return all(runs[i].cancel.is_set() for i in range(len(runs)) if i not in reported)

        forget = [r.cancel.on_set(self._wake) for r in runs]
        try:
            while len(reported) < len(runs):
                self.cache.wait_for(wake, timeout=5.0)
                job = self.cache.get(job_name)
                if self.stopping.is_set():
                    break
                if job is not None:
                    succeeded, failed = _indexes(job)
                    seconds = time.monotonic() - began
                    for i in sorted((succeeded | failed) - reported):
                        if len(reported) == len(runs) - 1:
                            break  # the last one waits for the record (module docstring)
                        tell(i, self._outcome(i in succeeded, seconds, where))
                    if finished(job):  # the completion controller records it: wait for that
                        if not self._wait_recorded(seq):
                            break
                        self._tell_recorded(seq, runs, reported, tell, seconds, where)
                        return
                elif seen["job"]:  # deleted: recorded by a rival, or ended by a person
                    self.batches.reread(seq)
                    self._tell_recorded(seq, runs, reported, tell, time.monotonic() - began,
                                        where)  # fmt: skip
                    return
                left = [i for i in range(len(runs)) if i not in reported]
                every_left_cancelled = left and all(runs[i].cancel.is_set() for i in left)
                if job is not None and every_left_cancelled and self._end(job_name, seq, left):
                    for i in left:
                        tell(i, _cancelled(where))
                    return
            for i in range(len(runs)):  # stopping: the Job runs on; whoever is next records it
                if i not in reported:
                    tell(i, Outcome(False, interrupted=True, log_path=where))
        finally:
            for f in forget:
                f()

    def _wait_recorded(self, seq: int) -> bool:
        """Wait until the batch's outcome is in the record (whoever wrote it); False when the
        manager stops first."""

        def recorded() -> bool:
            batch = self.batches.batch(seq)
            return batch is not None and batch.recorded

        while not self.stopping.is_set():
            if self.cache.wait_for(lambda: recorded() or self.stopping.is_set(), timeout=5.0):
                if recorded():
                    return True
            elif not recorded():
                self.batches.reread(seq)  # a rival may have recorded it: read it afresh
        return recorded()

    def _tell_recorded(self, seq, runs, reported, tell, seconds, where) -> None:
        batch = self.batches.batch(seq)
        stuck = self.completions.stuck.pop(bo.batch_name(self.queue, seq), None)
        for i in range(len(runs)):
            if i in reported:
                continue
            state = batch.state(i) if batch is not None and batch.recorded else "failed"
            outcome = self._outcome(state == "succeeded", seconds, where, state)
            if stuck is not None and state == "failed":  # failed as stuck (`stuck.py`)
                outcome = Outcome(False, error=stuck, log_path=where, seconds=seconds, final=True)
            tell(i, outcome)

    def _outcome(self, ok: bool, seconds: float | None, where: str, state: str = "") -> Outcome:
        if ok:
            return Outcome(True, exit_code=0, log_path=where, seconds=seconds)
        if state == "cancelled":
            return _cancelled(where)
        return Outcome(
            False,
            exit_code=1,
            error=self._failure,
            log_path=where,
            seconds=seconds,
            final=True,  # its retries ran inside the Job: the manager runs it no more
        )

    def _end(self, job_name: str, seq: int, cancelled: list[int]) -> bool:
        """Every unfinished member is cancelled: record them so, then end the Job (re-read;
        a Job that finished meanwhile keeps its outcome: False)."""
        fresh = self.api.find("jobs", job_name)
        if fresh is None or finished(fresh):
            return False
        succeeded, failed = _indexes(fresh)
        outcomes = {i: ("succeeded", 1) for i in succeeded}
        outcomes.update({i: ("failed", self.max_attempts) for i in failed})
        outcomes.update({i: ("cancelled", 1) for i in cancelled if i not in outcomes})
        self.batches.record(seq, outcomes)
        self.completions.remove_finalizer(job_name)
        self.api.remove("jobs", job_name, fresh["metadata"]["uid"])
        return True

    def _wake(self) -> None:
        with self.cache.changed:
            self.cache.changed.notify_all()


def create_job(api: KubeApi, body: dict, metrics=None) -> dict | None:
    """Create a Job, counted in the backend's metrics: the Job created, or None when one of
    that name exists (409 AlreadyExists: dispatched elsewhere, or before a restart)."""
    try:
        job = api.create("jobs", body)
    except KubeError as exc:
        if exc.reason != "AlreadyExists":
            raise
        if metrics:
            metrics.conflicts.inc()
        return None
    if metrics:
        metrics.created.inc()
    return job


def _indexes(job: dict) -> tuple[set[int], set[int]]:
    status = job.get("status") or {}
    return (
        bo.parse_indexes(status.get("completedIndexes")),
        bo.parse_indexes(status.get("failedIndexes")),
    )


def unfinished_members(job: dict) -> int:
    """How many of a batch Job's members have not finished (the slots it uses)."""
    if finished(job):
        return 0
    succeeded, failed = _indexes(job)
    return max(0, bo.batch_size_of(job) - len(succeeded) - len(failed))


def _cancelled(where: str) -> Outcome:
    return Outcome(False, error="cancelled: it left the source", log_path=where, cancelled=True)
