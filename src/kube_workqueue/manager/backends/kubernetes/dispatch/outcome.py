"""The wait for a dispatched Job's outcome, and the `Outcome` its record says.

A run of the Kubernetes backend (`backend.py`) has created its Job and ConfigMap, or adopted a
Job already running; here it waits until the Job's outcome is in the durable record
(`records/record.py`), whoever wrote it. The outcome is read from the record only; the Job
cache wakes the wait and says when to read the record afresh. Four things end it:

  * the record has this attempt's end (at this version, when the Job says one): read as
    succeeded, stuck (the completion controller's reason), failed for good (an exit code of
    --fail-fast-exit-codes) or failed;
  * the run's `Cancel` is set and the record has no end yet: the Job, read afresh, is ended
    (`_end_job`) - unless it finished first, when its outcome stands and the wait goes on;
  * the Job finished and its finalizer is gone, or it is gone after it was seen: a rival
    manager recorded it first (it removes the finalizer only after its write), so the record
    is read afresh - up to RECORD_LOOKS times a second apart, a rival may be mid-write; a Job
    deleted before anyone recorded it, or finished with no record after all the looks, is a
    failure said in words;
  * the manager stops: the Job runs on (`outlives`), and whoever manages the queue next records
    it and adopts the claim.
"""

from __future__ import annotations

from ....ports import Cancel, Outcome
from ..client.cache import finished
from ..manifests import objects as ko

RECORD_LOOKS = 10  # fresh reads of the record for a Job that finished elsewhere


class AwaitsOutcome:
    """The Kubernetes backend's wait (a mixin of `KubernetesBackend`, which holds what it
    reads: `queue`, `record`, `cache`, `completions`, `_stopping`, and `_end_job`, the delete
    of a Job that still runs)."""

    def _await(self, name: str, job: dict, where: str, cancel: Cancel | None = None) -> Outcome:
        cancel = cancel or Cancel()
        item_hash = ko.item_hash(self.queue, name)
        attempt = ko.job_attempt(job)

        job_name = job["metadata"]["name"]
        seen = {"job": False}

        version = ko.job_version(job)

        def recorded() -> bool:
            entry = self.record.entry(item_hash)
            if entry is None or entry.state == "pending" or entry.attempts < attempt:
                return False
            return version is None or entry.version in (None, version)

        def settled_elsewhere() -> bool:
            """Recorded by someone else (a rival manager removed the finalizer first, which it
            does only after writing the record), or gone after we saw it."""
            cached = self.cache.get(job_name)
            if cached is None:
                return seen["job"]
            seen["job"] = True
            finalizers = cached["metadata"].get("finalizers") or []
            return finished(cached) is not None and ko.RECORD_FINALIZER not in finalizers

        outlived = {"cancel": False}  # the Job finished before the cancel could end it

        def cancelled() -> bool:
            return cancel.is_set() and not outlived["cancel"] and not recorded()

        for _ in range(RECORD_LOOKS):
            self.cache.wait_for(
                lambda: recorded() or self._stopping.is_set() or settled_elsewhere() or cancelled()
            )
            if cancelled():
                if self._end_job(job_name) is False:  # it finished first: its outcome stands
                    outlived["cancel"] = True
                    continue
                return self._cancelled_outcome(where)
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
        if not recorded():  # stopping: the Job runs on, whoever manages the queue next records it
            return Outcome(False, interrupted=True, log_path=where, outlives=True)
        state, _ = self.record.get(item_hash)
        if state == "succeeded":
            return Outcome(True, exit_code=0, log_path=where)
        stuck = self.completions.stuck.pop(job_name, None)
        if stuck is not None:
            return Outcome(False, error=stuck, log_path=where)
        if self.record.final(item_hash):
            code = ko.fail_fast_code(self.cache.get(job_name))
            why = f"exit code {code}" if code is not None else "an exit code"
            return Outcome(
                False,
                exit_code=code,
                error=f"{why} listed in --fail-fast-exit-codes: failed for good",
                log_path=where,
                final=True,
            )
        return Outcome(False, exit_code=1, error="Job failed", log_path=where)

    @staticmethod
    def _cancelled_outcome(where: str) -> Outcome:
        error = "cancelled: it left the source"
        return Outcome(False, error=error, log_path=where, cancelled=True)
