"""A cache of one queue's Jobs (or its pods), from one list and then a watch (an informer, in
client-go's words), so the backend never lists Jobs or pods per item.

The thread lists the Jobs matching the queue's label selector, then watches from the list's
resourceVersion. A broken or ended stream resumes from the last version seen; a 410 (the
version was compacted away) or an unreachable API means a fresh list. Objects are kept as
slim dicts - name, uid, resourceVersion, labels, annotations, finalizers, deletionTimestamp,
creationTimestamp and status - decoded from raw JSON, never the client's model objects.

Readers ask `get(name)`, `items()` or wait on `changed` (a Condition notified after every
change); `synced` is set once the first list has been applied. `on_change(type, job)` is called
from the cache's thread after each change, for whoever acts on transitions.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from ....errors import UserError
from .api import KubeApi, KubeError

log = logging.getLogger(__name__)

_META_KEYS = (
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "labels",
    "annotations",
    "finalizers",
    "deletionTimestamp",
    "creationTimestamp",
    "generation",
)


def slim(obj: dict, keep: tuple[str, ...] = ("data",)) -> dict:
    """What the readers use: the metadata above, the status, and the fields in `keep` (a
    ConfigMap's data; a WorkQueue's spec) - not a Job's pod template."""
    meta = obj.get("metadata") or {}
    out = {
        "metadata": {k: meta[k] for k in _META_KEYS if k in meta},
        "status": obj.get("status") or {},
    }
    for field in keep:
        if field in obj:
            out[field] = obj[field]
    return out


def _name(obj: dict) -> str:
    return obj["metadata"]["name"]


def finished(job: dict) -> str | None:
    """'Complete' or 'Failed' once the Job has that condition True, else None."""
    for condition in (job.get("status") or {}).get("conditions") or []:
        if condition.get("type") in ("Complete", "Failed") and condition.get("status") == "True":
            return condition["type"]
    return None


class ClusterCache:
    def __init__(
        self,
        api: KubeApi,
        label_selector: str,
        *,
        on_change: Callable[[str, dict], None] | None = None,
        watch_timeout: int = 60,
        retry_delay: float = 1.0,
        kind: str = "jobs",
        resync_period: float | None = None,
        index_label: str | None = None,
        keep: tuple[str, ...] = ("data",),
        key: Callable[[dict], str] | None = None,
    ) -> None:
        """`resync_period`: every so often, replay every cached object to `on_change` as
        "SYNC" (an informer's resync), so a handler that missed a change gets it again.
        `index_label`: keep the objects findable by that label's value (`indexed`), as an
        informer's indexer does - one item's Jobs of every version, by its item-hash label.
        `keep`: the fields kept besides metadata and status (`slim`).
        `key`: what names an object in the cache (default its name; "namespace/name" for a
        cache that spans namespaces)."""
        self.key = key or _name
        self.api = api
        self.keep = keep
        self.kind = kind
        self.selector = label_selector
        self.on_change = on_change
        self.watch_timeout = watch_timeout
        self.retry_delay = retry_delay
        self.changed = threading.Condition()
        self.synced = threading.Event()
        self.relists = 0
        # Invariant: _jobs is the API server's set of matching Jobs as of _rv (slim copies).
        self._jobs: dict[str, dict] = {}
        # Invariant: _index maps each value of index_label to the names in _jobs carrying it.
        self.index_label = index_label
        self._index: dict[str, set[str]] = {}
        self._rv = ""
        self._stop = threading.Event()
        self._stream = None  # the open watch, so stop() can interrupt its blocking read
        self._thread = threading.Thread(target=self._run, name=f"{kind}-cache", daemon=True)
        self.resync_period = resync_period
        self._resync = threading.Thread(
            target=self._resync_loop, name=f"{kind}-resync", daemon=True
        )

    def start(self) -> ClusterCache:
        self._thread.start()
        if self.resync_period and self.on_change is not None:
            self._resync.start()
        return self

    def start_listed(self, timeout: float, problem: str) -> ClusterCache:
        """`start`, then wait until the first list is applied - what reads the cache before
        would take "nothing listed yet" for "nothing there" (a pause unknown, Jobs unseen). A
        `UserError` saying `problem` (the cache stopped) when the list does not come in
        `timeout` seconds."""
        self.start()
        if not self.synced.wait(timeout):
            self.stop()
            raise UserError(problem)
        return self

    @property
    def alive(self) -> bool:
        """Whether its list-and-watch thread runs (a liveness probe's question)."""
        return self._thread.is_alive()

    def _resync_loop(self) -> None:
        while not self._stop.wait(self.resync_period):
            if not self.synced.is_set():
                continue
            for obj in self.items():
                try:
                    self.on_change("SYNC", obj)
                except Exception:
                    log.exception("%s cache: a resync handler failed", self.kind)

    def stop(self) -> None:
        """Stop and wait for the thread: an open watch is shut down, not waited out."""
        self._stop.set()
        with self.changed:
            self.changed.notify_all()
        stream = self._stream
        if stream is not None:
            try:
                stream.shutdown()
            except Exception:
                pass
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=10)

    # -- reads -----------------------------------------------------------------------------

    def get(self, name: str) -> dict | None:
        with self.changed:
            return self._jobs.get(name)

    def items(self) -> list[dict]:
        with self.changed:
            return list(self._jobs.values())

    def indexed(self, value: str) -> list[dict]:
        """The objects whose `index_label` is `value`."""
        with self.changed:
            return [self._jobs[n] for n in self._index.get(value, ())]

    def _indexing(self, name: str, old: dict | None, new: dict | None) -> None:
        """Keep `_index` in step with one change of `_jobs` (the caller holds the lock)."""
        if self.index_label is None:
            return
        for obj, add in ((old, False), (new, True)):
            value = ((obj or {}).get("metadata", {}).get("labels") or {}).get(self.index_label)
            if value is None:
                continue
            names = self._index.setdefault(value, set())
            if add:
                names.add(name)
            else:
                names.discard(name)
                if not names:
                    del self._index[value]

    def __len__(self) -> int:
        return len(self._jobs)

    def wait_for(self, predicate: Callable[[], bool], timeout: float | None = None) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: predicate() or self._stop.is_set(), timeout)

    # -- the thread ------------------------------------------------------------------------

    def _apply(self, kind: str, job: dict) -> None:
        name = self.key(job)
        with self.changed:
            if kind == "DELETED":
                self._indexing(name, self._jobs.pop(name, None), None)
            else:
                self._indexing(name, self._jobs.get(name), job)
                self._jobs[name] = job
            self._rv = job["metadata"].get("resourceVersion") or self._rv
            self.changed.notify_all()
        if self.on_change is not None:
            try:
                self.on_change(kind, job)
            except Exception:
                log.exception("%s cache: a change handler failed for %s", self.kind, name)

    def _list(self) -> None:
        items, rv = self.api.list(self.kind, self.selector)
        fresh = {self.key(j): slim(j, self.keep) for j in items}
        with self.changed:
            gone = [j for n, j in self._jobs.items() if n not in fresh]
            self._jobs, self._rv = fresh, rv
            self._index = {}
            for name, job in fresh.items():
                self._indexing(name, None, job)
            self.relists += 1
            self.changed.notify_all()
        self.synced.set()
        if self.on_change is not None:
            for job in gone:
                self.on_change("DELETED", job)
            for job in fresh.values():
                self.on_change("SYNC", job)

    def _opened(self, stream) -> None:
        self._stream = stream
        if self._stop.is_set():
            stream.shutdown()

    def _run(self) -> None:
        need_list = True
        while not self._stop.is_set():
            try:
                if need_list:
                    self._list()
                    need_list = False
                for event in self.api.watch(
                    self.kind,
                    self.selector,
                    self._rv,
                    timeout_seconds=self.watch_timeout,
                    on_open=self._opened,
                ):
                    if self._stop.is_set():
                        return
                    self._apply(event["type"], slim(event["object"], self.keep))
            except KubeError as exc:
                need_list = True
                if exc.status != 410:
                    log.warning("%s cache: %s; re-listing", self.kind, exc)
                    self._stop.wait(self.retry_delay)
            except Exception:  # the cache must outlive any surprise; it lists afresh
                if self._stop.is_set():
                    return
                log.exception("%s cache: unexpected error; re-listing", self.kind)
                need_list = True
                self._stop.wait(self.retry_delay)
