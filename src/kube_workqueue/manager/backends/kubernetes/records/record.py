"""What ran, on Kubernetes: the durable record of finished items, and the running manager's facts.

Jobs are the record of what is running; finished Jobs are cleaned up (ttlSecondsAfterFinished,
history limits, a user's kubectl delete), so they cannot be the record of what *finished*. That
lives in a compact record of the manager's own in the namespace: sixteen ConfigMaps,
`<queue>-record-0` … `-f`, sharded by the first hex digit of each item's hash, mapping item
hash -> its entry (`Entry`):

    succeeded:2                     an outcome and the attempts it took (about 30 bytes an
    failed:3:final                  item, so 100,000 items fit); ":final" marks a failure no
    cancelled:1                     retry fixes (an exit code in --fail-fast-exit-codes)
    {"s":"succeeded","a":1,         the same as JSON when the source gives versions: "v" the
     "v":"s-9f2c…","h":[…]}         version it ran at, "h" earlier outcomes (newest first, at
                                    most HISTORY), kept when `--on-change rerun` runs it again
    {"s":"pending","a":0,"v":…}     a re-run asked for version "v": it waits to be dispatched

Every Job carries the finalizer `workqueue.dev/record`; the manager removes it only after the
Job's outcome is in the record, so no cleanup can make an item run again. Writes are
read-modify-write guarded by the resourceVersion read (409 Conflict -> read again), so several
managers may write at once.
"""

from __future__ import annotations

import json
import threading
import time
from typing import NamedTuple

from ..client.api import KubeApi, KubeError
from ..manifests import objects as ko

ROLE_LABEL = f"{ko.GROUP}/role"
HISTORY = 5  # earlier outcomes kept per item


class Entry(NamedTuple):
    state: str
    attempts: int
    final: bool = False
    version: str | None = None
    history: tuple = ()  # earlier entries as [state, attempts, version, finished], newest first

    def text(self) -> str:
        if self.version is None and not self.history:
            return f"{self.state}:{self.attempts}" + (":final" if self.final else "")
        body: dict = {"s": self.state, "a": self.attempts}
        if self.final:
            body["f"] = True
        if self.version is not None:
            body["v"] = self.version
        if self.history:
            body["h"] = [list(h) for h in self.history]
        return json.dumps(body, separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def parse(cls, value: str) -> Entry:
        """Either form above; anything unreadable is an entry of 0 attempts in its state."""
        if value.startswith("{"):
            try:
                body = json.loads(value)
                history = tuple(tuple(h) for h in body.get("h") or ())
                return cls(
                    str(body["s"]), int(body.get("a") or 0), bool(body.get("f")),
                    body.get("v"), history,
                )  # fmt: skip
            except (ValueError, KeyError, TypeError):
                return cls("failed", 0)
        state, _, rest = value.partition(":")
        attempts, _, flag = rest.partition(":")
        try:
            count = int(attempts or 0)
        except ValueError:
            count = 0
        return cls(state, count, flag == "final")


class RecordStore:
    def __init__(self, api: KubeApi, queue: str) -> None:
        self.api = api
        self.queue = queue
        self._lock = threading.Lock()
        # Invariant: _entries mirrors the shards' data as last read or written by this store.
        self._entries: dict[str, Entry] = {}

    def shard_name(self, item_hash: str) -> str:
        return f"{self.queue}-record-{item_hash[0]}"

    def load(self) -> None:
        items, _ = self.api.list("configmaps", f"{ko.QUEUE_LABEL}={self.queue},{ROLE_LABEL}=record")
        entries = {}
        for cm in items:
            for item_hash, value in (cm.get("data") or {}).items():
                entries[item_hash] = Entry.parse(value)
        with self._lock:
            self._entries = entries

    def reload(self, item_hash: str) -> None:
        """Read the shard of `item_hash` afresh from the API server: what a rival manager
        recorded since `load()` becomes known here."""
        cm = self.api.find("configmaps", self.shard_name(item_hash))
        if cm is None:
            return
        shard = item_hash[0]
        fresh = {key: Entry.parse(value) for key, value in (cm.get("data") or {}).items()}
        with self._lock:
            kept = {k: v for k, v in self._entries.items() if k[0] != shard}
            self._entries = {**kept, **fresh}

    def get(self, item_hash: str) -> tuple[str, int] | None:
        """(state, attempts) of the item's entry, or None."""
        with self._lock:
            entry = self._entries.get(item_hash)
        return None if entry is None else (entry.state, entry.attempts)

    def entry(self, item_hash: str) -> Entry | None:
        with self._lock:
            return self._entries.get(item_hash)

    def final(self, item_hash: str) -> bool:
        entry = self.entry(item_hash)
        return entry is not None and entry.final

    def version(self, item_hash: str) -> str | None:
        entry = self.entry(item_hash)
        return None if entry is None else entry.version

    def __len__(self) -> int:
        return len(self._entries)

    def entries(self) -> dict[str, tuple[str, int]]:
        """item hash -> (state, attempts), a copy."""
        with self._lock:
            return {h: (e.state, e.attempts) for h, e in self._entries.items()}

    def put(
        self,
        item_hash: str,
        state: str,
        attempts: int,
        *,
        final: bool = False,
        version: str | None = None,
    ) -> None:
        """Record an outcome (`final`: a failure no retry fixes), at the item's `version`
        when known; earlier outcomes kept (`rerun`) stay."""
        earlier = self.entry(item_hash)
        history = earlier.history if earlier is not None else ()
        self._write(item_hash, Entry(state, attempts, final, version, history))

    def rerun(self, item_hash: str, version: str | None) -> None:
        """The item runs again (at `version`): its outcome moves into its history, and the
        entry says pending - so no manager takes the old outcome for the new version's."""
        earlier = self.entry(item_hash)
        history: tuple = ()
        if earlier is not None:
            now = round(time.time(), 3)
            done = (earlier.state, earlier.attempts, earlier.version, now)
            history = (done, *earlier.history)[:HISTORY]
        self._write(item_hash, Entry("pending", 0, False, version, history))

    def remove(self, item_hash: str) -> None:
        self._write(item_hash, None)

    def _write(self, item_hash: str, entry: Entry | None) -> None:
        value = None if entry is None else entry.text()
        name = self.shard_name(item_hash)
        for _ in range(20):
            try:
                cm = self.api.get("configmaps", name)
            except KubeError as exc:
                if exc.reason != "NotFound":
                    raise
                if value is None:
                    break
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
                    break
                except KubeError as again:
                    if again.reason != "AlreadyExists":
                        raise
                    continue
            data = dict(cm.get("data") or {})
            if data.get(item_hash) == value:
                break
            if value is None:
                data.pop(item_hash)
            else:
                data[item_hash] = value
            cm["data"] = data
            try:
                self.api.replace("configmaps", name, cm)  # guarded by its resourceVersion
                break
            except KubeError as exc:
                if exc.reason != "Conflict":
                    raise
        else:
            raise KubeError(409, "Conflict", f"record {name}: too many concurrent writers")
        with self._lock:
            if entry is None:
                self._entries.pop(item_hash, None)
            else:
                self._entries[item_hash] = entry


class ManagerFacts:
    """The facts of the manager leading a queue (`Asked.facts`) in one ConfigMap,
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
