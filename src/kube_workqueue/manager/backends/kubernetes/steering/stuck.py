"""Stuck slots: a Job whose pod can never start holds a parallelism slot forever - unless
someone notices. This does.

The queue's pods are cached like its Jobs (one label-selected list + watch: the Job controller
copies the pod template's labels, the manager's queue label among them, onto every pod). Every
`interval` the detector looks at each unfinished Job's newest pod. A pod whose container waits
with a reason no retry fixes - ImagePullBackOff, ErrImagePull, InvalidImageName,
CreateContainerConfigError, CreateContainerError (`pods.IMAGE_REASONS`, `pods.CONFIG_REASONS`)
- for longer than `--stuck-timeout`, counted from the pod's creation (such a pod never ran, so
the count survives a manager restart), fails its item:

  1. the pod is read afresh from the API server (the cache may lag): still waiting so?
  2. the Job goes to the completion controller's queue to be failed (`request_fail`): outcome
     into the record, a Warning Event, then the Job deleted after a fresh read with a uid
     precondition - the slot is free. Retried with backoff on any API error.

A batch (one Indexed Job, `batches.py`) is stuck when every member that has not finished has
a newest pod waiting so, each for longer than the timeout (the same template: one wrong image
holds every member). The youngest of those pods is read afresh, and the batch goes to the
completion controller the same way: its finished members keep their outcomes, the stuck ones
are recorded failed, then the Job is deleted - every slot it held is free. A batch with one
member still running or waiting for its turn is left alone.

A pod that waits for a node (Unschedulable) is not failed: capacity may come (an autoscaler, a
drained node back); `workqueue status` says "waiting for a node". A suspended Job (Kueue) has no
pod and is waiting for admission, not stuck. Gauge: `workqueue_items_stuck{reason}`, the pods
waiting with such a reason now (whether or not their timeout has passed).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from ..client.cache import ClusterCache, finished
from ..manifests import batch_objects as bo
from ..manifests import pods
from .leader import parse_time

log = logging.getLogger(__name__)

STUCK_REASONS = pods.IMAGE_REASONS + pods.CONFIG_REASONS


def stuck_reason(pod: dict) -> str | None:
    """The waiting reason that makes `pod` stuck, or None."""
    for container in pods.container_statuses(pod.get("status") or {}):
        reason = ((container.get("state") or {}).get("waiting") or {}).get("reason")
        if reason in STUCK_REASONS:
            return reason
    return None


class StuckDetector:
    def __init__(
        self,
        jobs: ClusterCache,
        pod_cache: ClusterCache,
        read_pod: Callable[[str], dict | None],
        fail: Callable[[dict, str], None],
        *,
        timeout: float,
        interval: float | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`read_pod(name)` reads a pod from the API server (None when gone); `fail(job,
        why)` asks for a stuck Job's item to be failed (`CompletionController.request_fail`)."""
        self.jobs = jobs
        self.pod_cache = pod_cache
        self.read_pod = read_pod
        self.fail = fail
        self.timeout = timeout
        self.interval = interval if interval is not None else min(max(timeout / 5, 0.2), 10.0)
        self.clock = clock
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stuck-pods", daemon=True)

    def start(self) -> StuckDetector:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=10)

    def counts(self) -> dict[str, int]:
        """Pods of unfinished Jobs waiting with a stuck reason now, by reason (every such
        member of a batch, stuck as a whole or not)."""
        out: dict[str, int] = {}
        for _, stuck_pods, _ in self._looked_at():
            for pod in stuck_pods:
                reason = stuck_reason(pod)
                out[reason] = out.get(reason, 0) + 1
        return out

    def _candidates(self):
        """(Job, its stuck pods) of every unfinished Job whose work cannot start: the newest
        pod of a one-item Job; the newest pods of a batch whose every unfinished member's
        newest pod is stuck."""
        for job, stuck_pods, whole in self._looked_at():
            if whole:
                yield job, stuck_pods

    def _looked_at(self):
        """(Job, its stuck pods, whether that is all its unfinished work) of every unfinished
        Job with a stuck pod."""
        all_pods = self.pod_cache.items()
        newest = pods.by_job(all_pods)
        by_index = None
        for job in self.jobs.items():
            meta = job["metadata"]
            if finished(job) or meta.get("deletionTimestamp"):
                continue
            if bo.batch_of(job) is None:
                pod = newest.get(meta["name"])
                if pod is not None and stuck_reason(pod) is not None:
                    yield job, [pod], True
                continue
            if by_index is None:
                by_index = pods.by_index(all_pods)
            of_job = by_index.get(meta["name"]) or {}
            status = job.get("status") or {}
            done = bo.parse_indexes(status.get("completedIndexes"))
            done |= bo.parse_indexes(status.get("failedIndexes"))
            unfinished = [of_job.get(i) for i in range(bo.batch_size_of(job)) if i not in done]
            stuck_pods = [p for p in unfinished if p is not None and stuck_reason(p)]
            if stuck_pods:  # (the cache keeps no spec: the size is the batch's annotation)
                yield job, stuck_pods, len(stuck_pods) == len(unfinished)

    def check(self) -> int:
        """One look; returns how many Jobs were failed (a batch counts once)."""
        failed = 0
        now = self.clock()
        for job, stuck_pods in list(self._candidates()):
            times = [parse_time(p["metadata"].get("creationTimestamp")) for p in stuck_pods]
            known = [t for t in times if t]
            created = max(known) if known else 0.0  # the youngest: all waited this long
            if created and now - created < self.timeout:
                continue
            youngest = stuck_pods[times.index(created)] if created else stuck_pods[0]
            fresh = self.read_pod(youngest["metadata"]["name"])
            reason = stuck_reason(fresh) if fresh is not None else None
            if reason is None:
                continue  # it started, or went, meanwhile
            waited = now - created if created else self.timeout
            why = f"stuck: {reason} for {waited:.0f}s (--stuck-timeout {self.timeout:g}s)"
            members = f" ({len(stuck_pods)} members)" if bo.batch_of(job) is not None else ""
            log.warning("%s%s: %s; failing it to free its slots", job["metadata"]["name"],
                        members, why)  # fmt: skip
            self.fail(job, why)
            failed += 1
        return failed

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.check()
            except Exception:  # a failed look is retried at the next interval
                log.exception("stuck-pod check failed; trying again")
