"""What ran, on Kubernetes: the durable record, and the ledger view the reconciler reads.

Jobs are the record of what is running; finished Jobs are cleaned up (ttlSecondsAfterFinished,
history limits, a user's kubectl delete), so they cannot be the record of what *finished*. That
lives in a compact record of the manager's own in the namespace: sixteen ConfigMaps,
`<queue>-record-0` … `-f`, sharded by the first hex digit of each item's hash, mapping
item hash -> "succeeded:<attempts>", "failed:<attempts>" (":final" appended for a failure
no retry fixes: an exit code listed in --fail-fast-exit-codes) or "cancelled:<attempts>" (it
left the source: --cancel-removed) - about 30 bytes an item, so
100,000 items fit. Every Job carries the finalizer `workqueue.dev/record`; the manager removes it
only after the Job's outcome is in the record, so no cleanup can make an item run again. Writes are
read-modify-write guarded by the resourceVersion read (409 Conflict -> read again), so several
managers may write at once.

`ClusterLedger` satisfies `manager.ports.Ledger` over the cluster, and answers from the Job
cache first (running, or finished and not yet recorded), then the record,
then what this manager itself just did.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable

from ...ports import Row, State
from . import objects as ko
from .api import KubeApi, KubeError
from .cache import JobCache, finished

ROLE_LABEL = f"{ko.GROUP}/role"
FAIL_FAST = "PodFailurePolicy"  # the Failed condition's reason when a FailJob rule matched


class RecordStore:
    def __init__(self, api: KubeApi, queue: str) -> None:
        self.api = api
        self.queue = queue
        self._lock = threading.Lock()
        self._entries: dict[str, tuple[str, int]] = {}
        self._final: set[str] = set()  # hashes of failures no retry fixes

    def shard_name(self, item_hash: str) -> str:
        return f"{self.queue}-record-{item_hash[0]}"

    def load(self) -> None:
        items, _ = self.api.list("configmaps", f"{ko.QUEUE_LABEL}={self.queue},{ROLE_LABEL}=record")
        entries = {}
        final = set()
        for cm in items:
            for item_hash, value in (cm.get("data") or {}).items():
                entries[item_hash], is_final = parse_entry(value)
                if is_final:
                    final.add(item_hash)
        with self._lock:
            self._entries = entries
            self._final = final

    def reload(self, item_hash: str) -> None:
        """Read the shard of `item_hash` afresh from the API server: what a rival manager
        recorded since `load()` becomes known here."""
        cm = self.api.find("configmaps", self.shard_name(item_hash))
        if cm is None:
            return
        shard = item_hash[0]
        fresh = {}
        final = set()
        for key, value in (cm.get("data") or {}).items():
            fresh[key], is_final = parse_entry(value)
            if is_final:
                final.add(key)
        with self._lock:
            kept = {k: v for k, v in self._entries.items() if k[0] != shard}
            self._entries = {**kept, **fresh}
            self._final = {k for k in self._final if k[0] != shard} | final

    def get(self, item_hash: str) -> tuple[str, int] | None:
        with self._lock:
            return self._entries.get(item_hash)

    def __len__(self) -> int:
        return len(self._entries)

    def entries(self) -> dict[str, tuple[str, int]]:
        """item hash -> (state, attempts), a copy."""
        with self._lock:
            return dict(self._entries)

    def put(self, item_hash: str, state: str, attempts: int, *, final: bool = False) -> None:
        """Record an outcome; `final`: a failure no retry fixes (--fail-fast-exit-codes)."""
        self._write(item_hash, f"{state}:{attempts}" + (":final" if final else ""))
        with self._lock:
            self._entries[item_hash] = (state, attempts)
            if final:
                self._final.add(item_hash)
            else:
                self._final.discard(item_hash)

    def final(self, item_hash: str) -> bool:
        with self._lock:
            return item_hash in self._final

    def remove(self, item_hash: str) -> None:
        self._write(item_hash, None)
        with self._lock:
            self._entries.pop(item_hash, None)
            self._final.discard(item_hash)

    def _write(self, item_hash: str, value: str | None) -> None:
        name = self.shard_name(item_hash)
        for _ in range(20):
            try:
                cm = self.api.get("configmaps", name)
            except KubeError as exc:
                if exc.reason != "NotFound":
                    raise
                if value is None:
                    return
                body = {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {
                        "name": name,
                        "labels": {
                            **ko.MANAGED_BY,
                            ko.QUEUE_LABEL: self.queue,
                            ROLE_LABEL: "record",
                        },
                    },
                    "data": {item_hash: value},
                }
                try:
                    self.api.create("configmaps", body)
                    return
                except KubeError as again:
                    if again.reason != "AlreadyExists":
                        raise
                    continue
            data = dict(cm.get("data") or {})
            if value is None:
                if item_hash not in data:
                    return
                data.pop(item_hash)
            elif data.get(item_hash) == value:
                return
            else:
                data[item_hash] = value
            cm["data"] = data
            try:
                self.api.replace("configmaps", name, cm)  # guarded by its resourceVersion
                return
            except KubeError as exc:
                if exc.reason != "Conflict":
                    raise
        raise KubeError(409, "Conflict", f"record {name}: too many concurrent writers")


def parse_entry(value: str) -> tuple[tuple[str, int], bool]:
    """ "succeeded:2", "failed:1" or "failed:1:final" -> ((state, attempts), final)."""
    state, _, rest = value.partition(":")
    attempts, _, flag = rest.partition(":")
    try:
        count = int(attempts or 0)
    except ValueError:
        count = 0
    return (state, count), flag == "final"


def failed_fast(job: dict) -> bool:
    """The Job failed by its podFailurePolicy's FailJob rule (--fail-fast-exit-codes)."""
    return any(
        c.get("type") == "Failed" and c.get("status") == "True" and c.get("reason") == FAIL_FAST
        for c in (job.get("status") or {}).get("conditions") or []
    )


def job_state(job: dict) -> tuple[str, int]:
    annotations = job["metadata"].get("annotations") or {}
    attempts = int(annotations.get(ko.ATTEMPT_ANNOTATION) or 1)
    outcome = finished(job)
    if outcome == "Complete":
        return State.SUCCEEDED.value, attempts
    if outcome == "Failed":
        return State.FAILED.value, attempts
    return State.RUNNING.value, attempts


class ManagerFacts:
    """The facts of the manager leading a queue (`Manager.facts`) in one ConfigMap,
    `<queue>-manager`, for `workqueue status` run from anywhere: one write when the manager
    starts, one per change of parallelism, and one when it stops ("stopped" set)."""

    def __init__(self, api: KubeApi, queue: str) -> None:
        self.api = api
        self.name = f"{queue}-manager"
        self.queue = queue

    def write(self, facts: dict | None) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": self.name,
                "labels": {ko.QUEUE_LABEL: self.queue, ROLE_LABEL: "manager"},
            },
            "data": {"facts": json.dumps(facts or {"stopped": time.time()})},
        }
        try:
            self.api.replace("configmaps", self.name, body)
        except KubeError as exc:
            if exc.reason != "NotFound":
                raise
            self.api.create("configmaps", body)

    def read(self) -> dict | None:
        """The facts of the manager running the queue now, or None."""
        cm = self.api.find("configmaps", self.name)
        if cm is None:
            return None
        try:
            facts = json.loads((cm.get("data") or {}).get("facts") or "{}")
        except ValueError:
            return None
        return None if not isinstance(facts, dict) or "stopped" in facts else facts


class ClusterLedger:
    """`manager.ports.Ledger` over the cluster (see the module docstring)."""

    def __init__(
        self,
        queue: str,
        cache: JobCache,
        record: RecordStore,
        *,
        namespace: str = "",
        facts: ManagerFacts | None = None,
        control=None,
    ) -> None:
        self.queue = queue
        self.where = f"namespace {namespace}, queue {queue}" if namespace else f"queue {queue}"
        self.cache = cache
        self.record = record
        self._lock = threading.Lock()
        self._local: dict[str, tuple[str, int]] = {}
        self._rows: dict[str, dict] = {}
        self.facts = facts  # where `note_manager` leaves the manager's facts (None: nowhere)
        self.control = control  # the queue's pause state (control.Control), when cached

    def _hash(self, name: str) -> str:
        return ko.item_hash(self.queue, name)

    def state(self, name: str) -> tuple[str, int] | None:
        """The item's Job if there is one (running, or finished with its outcome); else what
        this manager is doing with it right now; else the record; else what it last did;
        else pending if this manager has seen it listed."""
        job = self.cache.get(ko.object_name(self.queue, name))
        if job is not None and not job["metadata"].get("deletionTimestamp"):
            return job_state(job)
        with self._lock:
            local = self._local.get(name)
        if local is not None and local[0] == State.RUNNING.value:
            return local
        recorded = self.record.get(self._hash(name))
        if recorded is not None:
            return recorded
        if local is None and name in self._rows:  # seen, never started: pending
            return State.PENDING.value, 0
        return local

    def see(self, names: Iterable[str]) -> list[str]:
        now = time.time()
        new = []
        with self._lock:
            for name in names:
                if name not in self._rows:
                    self._rows[name] = {"first_seen": now}
                    new.append(name)
        return new

    def start(self, name: str, log_path: str, version: str | None = None) -> int:
        current = self.state(name)
        attempts = (current[1] if current else 0) + 1
        with self._lock:
            self._local[name] = (State.RUNNING.value, attempts)
            row = self._rows.setdefault(name, {"first_seen": time.time()})
            row.update(started=time.time(), finished=None, log_path=log_path)
        return attempts

    def finish(self, name: str, succeeded: bool, exit_code: int | None, error: str | None):
        state = State.SUCCEEDED if succeeded else State.FAILED
        with self._lock:
            attempts = self._local.get(name, (None, 1))[1]
            self._local[name] = (state.value, attempts)
            self._rows.setdefault(name, {"first_seen": time.time()}).update(
                finished=time.time(), exit_code=exit_code, last_error=error
            )

    def requeue(self, name: str) -> None:
        with self._lock:
            attempts = self._local.get(name, (None, 1))[1]
            self._local[name] = (State.PENDING.value, max(0, attempts - 1))

    def cancel(self, name: str) -> bool:
        """Recorded cancelled in the durable record (so no manager runs it again), unless it
        had finished. A pending item never seen running has 0 attempts."""
        current = self.state(name)
        if current is None:
            return False
        if current[0] in (State.SUCCEEDED.value, State.CANCELLED.value):
            return False
        self.record.put(self._hash(name), State.CANCELLED.value, current[1])
        with self._lock:
            self._local[name] = (State.CANCELLED.value, current[1])
            self._rows.setdefault(name, {"first_seen": time.time()}).update(
                finished=time.time(), last_error="cancelled: it left the source"
            )
        return True

    def take_retry_requests(self) -> list[str]:
        return []  # `workqueue retry` acts on the cluster directly: nothing is left for us

    def paused_since(self) -> float | None:
        return self.control.paused_since() if self.control is not None else None

    def version_ran(self, name: str) -> str | None:
        return None  # the cluster's record keeps no versions yet: --on-change is local-only

    def rerun(self, name: str, version: str) -> bool:
        return False

    def gave_up(self, name: str) -> bool:
        """A failure no retry fixes: its Job failed fast, or the record says so."""
        job = self.cache.get(ko.object_name(self.queue, name))
        if job is not None and not job["metadata"].get("deletionTimestamp"):
            return failed_fast(job)
        return self.record.final(self._hash(name))

    def note_manager(self, facts: dict | None) -> None:
        """Kept in the queue's `<queue>-manager` ConfigMap (see `ManagerFacts`)."""
        if self.facts is not None:
            self.facts.write(facts)

    def close(self) -> None:
        return None

    def row(self, name: str) -> Row | None:
        current = self.state(name)
        with self._lock:
            data = self._rows.get(name)
        if current is None and data is None:
            return None
        data = data or {"first_seen": 0.0}
        state, attempts = current or (State.PENDING.value, 0)
        return Row(
            name,
            state,
            attempts,
            data.get("first_seen", 0.0),
            data.get("started"),
            data.get("finished"),
            data.get("exit_code"),
            data.get("log_path"),
            data.get("last_error"),
        )

    def rows(self, state: str | None = None) -> list[Row]:
        """The items this manager has seen, or those in `state`, by name."""
        with self._lock:
            names = sorted(self._rows)
        rows = [r for r in (self.row(n) for n in names) if r is not None]
        return rows if state is None else [r for r in rows if r.state == state]

    def counts(self) -> dict[str, int]:
        out = {s.value: 0 for s in State}
        for r in self.rows():
            out[r.state] += 1
        return out
