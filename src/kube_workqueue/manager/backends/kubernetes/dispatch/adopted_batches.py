"""The members of batches a manager finds unrecorded at its start, awaited until their batch's
record says how they ended.

A batch whose outcome is not recorded yet - its Job runs, or a crash left its claim without one
and `BatchRunner.adopt_unstarted` has just created it - runs on without the manager that
claimed it. The next manager takes its members over (`take`, through `adopted.Adoptions`), each
as a run of its own holding one capacity slot, and `await_member` reports each once the
batch's outcome is in the record, whoever writes it (this manager's completion controller
records a finished batch Job, a rival's may too). Found by the random-kill drive: a `--once`
run counted such members "already done" and exited while their pods ran.

An adopted member's outcome:
    recorded                 its state there (succeeded, failed for good, cancelled)
    released meanwhile       interrupted: `workqueue retry` made it pending again
    its Job deleted, unrecorded
                             failed for good, saying so (a person deleted it)
    the manager stops first  interrupted: it stays running for whoever manages the queue next

Invariant: a batch's Job name is in the backend's `in_flight` while any of its adopted members
is awaited (`_waiting[seq]` > 0), so `others_running` does not count its slots a second time
beside the adopted runs'. Caller duties: `take()` once at start, after `adopt_unstarted`;
`await_member` once per member taken.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from ....ports import Outcome
from ..client.api import KubeApi, KubeError
from ..client.cache import ClusterCache
from ..manifests import batch_objects as bo
from ..manifests import objects as ko
from ..records.batch_record import BatchRecords

log = logging.getLogger(__name__)


class AdoptedMembers:
    def __init__(
        self,
        api: KubeApi,
        queue: str,
        cache: ClusterCache,
        batches: BatchRecords,
        stopping: threading.Event,
        in_flight: set[str],
        outcome: Callable[..., Outcome],
    ) -> None:
        """`outcome(ok, seconds, where, state)`: the backend's outcome of a recorded member."""
        self.api = api
        self.queue = queue
        self.cache = cache
        self.batches = batches
        self.stopping = stopping
        self.in_flight = in_flight
        self._outcome = outcome
        self._waiting: dict[int, int] = {}  # seq -> its adopted members not yet awaited
        self._lock = threading.Lock()

    def take(self) -> list[tuple[str, int, int]]:
        """Every unrecorded batch's members, (name, seq, attempt): each to be awaited."""
        members = self.batches.running_members()
        with self._lock:
            for _, seq, _ in members:
                self._waiting[seq] = self._waiting.get(seq, 0) + 1
                self.in_flight.add(bo.batch_name(self.queue, seq))
        return members

    def await_member(self, name: str, seq: int) -> Outcome:
        """A taken member's outcome (the module docstring's table)."""
        job_name = bo.batch_name(self.queue, seq)
        where = f"job/{job_name} (kubectl logs {job_name}-<index>-…)"
        try:
            gone = not self._recorded_or_gone(seq, job_name)
        finally:
            with self._lock:
                self._waiting[seq] -= 1
                if not self._waiting[seq]:
                    del self._waiting[seq]
                    self.in_flight.discard(job_name)
        found = self.batches.lookup(ko.item_hash(self.queue, name))
        if found is None or found.seq != seq:
            return Outcome(False, interrupted=True, log_path=where)
        if found.state != "running":
            return self._outcome(found.state == "succeeded", None, where, found.state)
        if gone:
            return Outcome(
                False,
                exit_code=1,
                log_path=where,
                final=True,
                error="its batch's Job was deleted before its outcome was recorded",
            )
        return Outcome(False, interrupted=True, log_path=where)

    def _recorded_or_gone(self, seq: int, job_name: str) -> bool:
        """Wait until the batch is recorded (True) or its Job is gone unrecorded (False), or
        the manager stops (True: nothing is concluded). Every 5 s without news the batch is
        read afresh (a rival may have recorded it); an API error only delays the next look."""

        def recorded() -> bool:
            batch = self.batches.batch(seq)
            return batch is not None and batch.recorded

        while not recorded() and not self.stopping.is_set():
            if self.cache.wait_for(lambda: recorded() or self.stopping.is_set(), timeout=5.0):
                continue
            try:
                self.batches.reread(seq)
                unrecorded_without_job = (
                    not recorded()
                    and self.cache.get(job_name) is None
                    and self.api.find("jobs", job_name) is None
                )
                if unrecorded_without_job:
                    return False
            except KubeError as exc:
                log.warning("batch %s: cannot read it now (%s); waiting on", job_name, exc)
        return True
