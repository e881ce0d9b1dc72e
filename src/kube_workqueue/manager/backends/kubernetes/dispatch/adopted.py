"""Work this manager finds running at its start - one-item Jobs and unrecorded batches -
taken over like its own.

A manager that dies (or a rival that runs beside it) leaves Jobs unfinished. The Jobs run on
without it and the completion controller records their outcome whoever watches, so no item
runs twice; but the new manager once only *skipped* those items - a `--once` run counted them
"already done" while they still ran, and a Job a crash left without its item ConfigMap (the
crash between the two creates, `backend.py`) never ran at all, its item reported done. Taken
over instead (`manager.ports.AdoptsWork`, `manager.runtime.adoption`):

  * `running_items(cache)` - every unfinished, not-deleting one-item Job of the queue, by its
    item's name (the `workqueue.dev/item` annotation) with its attempt. Each is awaited
    through `run()`, holding one capacity slot, with the item's data read from the source
    again (`adopted_needs_data`). When the data is for the very Job that runs (same
    deterministic name: same item, same version) `run()` dispatches as usual - the Job
    answers 409 AlreadyExists and is awaited, and its ConfigMap, if a crash kept it from being
    written, is written now, so the pod can start. Otherwise (the item left the source, or
    changed version since) the Job is awaited as it is: its data is never guessed;
  * the members of every batch whose outcome is not recorded yet (`offer_members`: its Job
    runs, or a crash left its claim without one and `BatchRunner.adopt_unstarted` has just
    created it). A batch's Job is not in `running_items`: its claim ConfigMap speaks for its
    members. Each is awaited through `run()` until its batch's record says how it ended
    (`adopted_batches.AdoptedMembers`) - the same slot per member as a batch this manager claimed.
    Found by a `--once` run that counted a running batch's members "already done" and ended
    before them.

Invariant: an item is adopted at most once per manager (`Adoptions.take` forgets it).
"""

from __future__ import annotations

import threading

from ..client.cache import ClusterCache, finished
from ..manifests import batch_objects as bo
from ..manifests import objects as ko


def running_items(cache: ClusterCache) -> dict[str, tuple[str, int]]:
    """item name -> (its running Job's name, the attempt it is), from the synced cache."""
    found: dict[str, tuple[str, int]] = {}
    for job in cache.items():
        meta = job["metadata"]
        if finished(job) or meta.get("deletionTimestamp") or bo.batch_of(job) is not None:
            continue
        annotations = meta.get("annotations") or {}
        name = annotations.get(ko.ITEM_ANNOTATION)
        if name is None:
            continue
        attempt = ko.job_attempt(job)
        if name not in found or attempt > found[name][1]:
            found[name] = (meta["name"], attempt)
    return found


class Adoptions:
    """The Jobs handed to the manager as adopted, until `run()` takes each one."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: dict[str, str] = {}  # item name -> the running Job's name
        self._members: dict[str, int] = {}  # item name -> the unrecorded batch holding it

    def offer(self, cache: ClusterCache) -> list[tuple[str, int]]:
        """The (item, attempt) units to adopt, remembered for `take`."""
        items = running_items(cache)
        with self._lock:
            self._jobs.update({name: job for name, (job, _) in items.items()})
        return [(name, attempt) for name, (_, attempt) in sorted(items.items())]

    def take(self, name: str) -> str | None:
        """The adopted Job of `name` (once), or None when `name` was not adopted."""
        with self._lock:
            return self._jobs.pop(name, None)

    def offer_members(self, members: list[tuple[str, int, int]]) -> list[tuple[str, int]]:
        """The (item, attempt) units of unrecorded batches' `members` (name, seq, attempt),
        remembered for `take_member`."""
        with self._lock:
            self._members.update({name: seq for name, seq, _ in members})
        return [(name, attempt) for name, _, attempt in members]

    def take_member(self, name: str) -> int | None:
        """The batch `name` was adopted in (once), or None when it was not."""
        with self._lock:
            return self._members.pop(name, None)
