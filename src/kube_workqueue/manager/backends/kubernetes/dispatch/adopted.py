"""One-item Jobs this manager finds running at its start, taken over like its own.

A manager that dies (or a rival that runs beside it) leaves one-item Jobs unfinished. The Jobs
run on without it and the completion controller records their outcome whoever watches, so no
item runs twice; but until now the new manager only *skipped* those items - a `--once` run
counted them "already done" while they still ran, and a Job a crash left without its item
ConfigMap (the crash between the two creates, `backend.py`) never ran at all, its item
reported done. Taken over instead (`manager.ports.AdoptsWork`, `manager.runtime.adoption`):

  * `running_items(cache)` - every unfinished, not-deleting one-item Job of the queue, by its
    item's name (the `workqueue.dev/item` annotation) with its attempt. A batch's Job is not
    here: its claim ConfigMap speaks for its members (`batches.py`);
  * each is awaited through `run()`, holding one capacity slot, with the item's data read
    from the source again (`adopted_needs_data`). When the data is for the very Job that runs
    (same deterministic name: same item, same version) `run()` dispatches as usual - the Job
    answers 409 AlreadyExists and is awaited, and its ConfigMap, if a crash kept it from
    being written, is written now, so the pod can start. Otherwise (the item left the source,
    or changed version since) the Job is awaited as it is: its data is never guessed.

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
