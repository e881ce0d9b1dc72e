"""What a crash between an item's Job and its ConfigMap leaves behind, and its cleaning.

A one-Job-per-item dispatch writes two objects (`backend.py`): the Job first, then the
ConfigMap with the item's data, owned by the Job. A manager that dies between the two leaves
one of two orphans, depending on its version and the moment:

  * an **unfinished Job whose ConfigMap never came** - its pods cannot mount their data, so
    the item never ran. The Job's record finalizer is removed, the Job deleted, and the item
    is dispatched again by the next listing;
  * an **item ConfigMap that no Job owns and whose Job does not exist** (left by an older
    version that wrote the ConfigMap first): deleted.

Neither is touched until it is `min_age` old (a Job whose ConfigMap is being written right
now by a rival manager is not an orphan), and each is re-read from the API server and deleted
with a uid precondition, so a newer object of the same name is never removed. A batch's Job
is never an orphan here: its ConfigMap is its claim, written first and kept (`batches.py`).

Caller duties: run it once the Job cache is synced (it reads unfinished Jobs from the cache)
and before dispatching starts (`parts.setup`); it calls the API, never from a cache handler.
"""

from __future__ import annotations

import logging
import time

from ..client.api import KubeApi
from ..client.cache import ClusterCache, finished
from ..manifests import batch_objects as bo
from ..manifests import objects as ko
from ..steering.leader import parse_time
from .settler import CompletionController

log = logging.getLogger(__name__)

ORPHAN_AGE_SECONDS = 60.0


def clean_orphans(
    api: KubeApi,
    queue: str,
    cache: ClusterCache,
    completions: CompletionController,
    min_age: float = ORPHAN_AGE_SECONDS,
) -> int:
    """Remove the queue's orphans (see the module docstring) at least `min_age` seconds old.
    Returns how many objects were removed."""
    config_maps, _ = api.list("configmaps", f"{ko.QUEUE_LABEL}={queue},{ko.ITEM_HASH_LABEL}")
    with_data = {cm["metadata"]["name"] for cm in config_maps}
    removed = sum(_remove_unowned(api, cache, cm, min_age) for cm in config_maps)
    for job in cache.items():
        meta = job["metadata"]
        if meta["name"] in with_data or finished(job) or meta.get("deletionTimestamp"):
            continue
        removed += _remove_dataless(api, completions, job, min_age)
    return removed


def _remove_unowned(api: KubeApi, cache: ClusterCache, config_map: dict, min_age: float) -> int:
    """1 when `config_map` was an orphan and is gone now, else 0."""
    meta = config_map["metadata"]
    if meta.get("ownerReferences") or cache.get(meta["name"]) is not None:
        return 0
    if _age(meta.get("creationTimestamp")) < min_age:
        return 0
    fresh = api.find("configmaps", meta["name"])
    if fresh is None or fresh["metadata"].get("ownerReferences"):
        return 0
    if api.find("jobs", meta["name"]) is not None:
        return 0  # its Job exists after all
    return api.remove("configmaps", meta["name"], meta["uid"])


def _remove_dataless(
    api: KubeApi, completions: CompletionController, job: dict, min_age: float
) -> int:
    """1 when `job` (unfinished, with no ConfigMap in the listing) never got its data and is
    deleted now, else 0."""
    meta = job["metadata"]
    if bo.batch_of(job) is not None:  # its ConfigMap is its claim: made first, kept
        return 0
    if _age(meta.get("creationTimestamp")) < min_age:
        return 0
    if api.find("configmaps", meta["name"]) is not None:
        return 0
    fresh = api.find("jobs", meta["name"])
    if fresh is None or finished(fresh) or (fresh.get("status") or {}).get("succeeded"):
        return 0
    log.warning("%s: its item data never came (a crash); dispatching again", meta["name"])
    completions.remove_finalizer(meta["name"])
    return api.remove("jobs", meta["name"], fresh["metadata"]["uid"])


def _age(timestamp: str | None) -> float:
    """Seconds since an API timestamp; infinitely old when the object has none."""
    if not timestamp:
        return float("inf")
    return time.time() - parse_time(timestamp)
