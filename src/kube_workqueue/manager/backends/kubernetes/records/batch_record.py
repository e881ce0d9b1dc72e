"""The record of batches: each batch's ConfigMap is first its claim on its members, then, once
its Job has ended, the durable record of their outcomes - kept after the Job is gone.

Exactly once, with rival managers and restarts, by numbering: batch `seq` is the ConfigMap
`<queue>-batch-<seq>`, and the API server creates a name once (409 AlreadyExists for a
second). A manager creates batch `seq` only when it knows every batch below it - it created
each, or read it after its create of that number was refused - so it never claims an item a
batch it does not know holds. At start it lists every batch and goes on from the highest.
The Job, named after its ConfigMap, comes second: a manager killed between the two leaves a
claim without a Job, and the next manager creates that very Job (`unstarted`), never a second
batch for the same items.

The ConfigMap's data has two forms - the claim while the Job runs, the record once it has
ended - read and written by `batch_data.py`, which also holds a batch as this manager keeps it
in memory (`Held`).

An item's state is that of the newest batch holding it and not released (`lookup`); every later
change of it (a retry, a cancel) is written into that batch's record, read-modify-write guarded
by its resourceVersion, so no rival's write is lost.

Invariant: `_next` moves only in `claim` (past a number it created or was refused) and `load`
(past the highest listed) - never because a batch was read another way (a rival's, recorded by
this manager's completion controller): so every batch below `_next` is known here.
`_where` maps each item hash to the newest (seq, index) holding it, unreleased;
`_batches[seq]` is that batch as last read or written here (`Held`: a few bytes an item, so a
manager knowing 1,000,000 finished items stays small).
"""

from __future__ import annotations

import threading
from array import array
from typing import NamedTuple

from ..client.api import KubeApi, KubeError
from ..manifests import batch_objects as bo
from ..manifests import objects as ko
from .batch_data import RELEASED_KEY, Batch, Held, indexes_text, parse, render
from .hash_index import HashIndex

INDEX_BITS = 20  # a batch's index in the low bits of `_where`'s values (at most 100,000)
INDEX_MASK = (1 << INDEX_BITS) - 1


def _at(seq: int, index: int) -> int:
    return seq << INDEX_BITS | index


class Found(NamedTuple):
    """What the record says of one item: its batch, its index there, its state."""

    seq: int
    index: int
    state: str  # "running" until the batch's outcome is recorded
    attempts: int
    version: str | None


class BatchRecords:
    def __init__(self, api: KubeApi, queue: str) -> None:
        self.api = api
        self.queue = queue
        self._lock = threading.Lock()
        self._claiming = threading.Lock()  # one claim at a time: numbers are taken in order
        self._batches: dict[int, Held] = {}
        self._where = HashIndex()  # item hash (as an int) -> seq << INDEX_BITS | index
        self._next = 1

    # -- reading ---------------------------------------------------------------------------

    def load(self) -> None:
        """Every batch of the queue, from one list."""
        items, _ = self.api.list("configmaps", f"{bo.batch_selector(self.queue)},"
                                 f"{bo.ROLE_LABEL}=batch")  # fmt: skip
        keys, values = array("Q"), array("Q")  # every (hash, where), the index made at once
        with self._lock:
            self._batches = {}
            items.sort(key=lambda c: bo.seq_of(c["metadata"]["name"]) or 0, reverse=True)
            while items:  # oldest first: a newer batch's word on an item wins
                cm = items.pop()  # each ConfigMap let go of once taken in
                seq = bo.seq_of(cm["metadata"]["name"])
                if seq is None:
                    continue
                held = self._batches[seq] = Held(parse(self.queue, seq, cm.get("data") or {}))
                released = held.released
                for i, h in enumerate(held.hashes):
                    if i not in released:
                        keys.append(h)
                        values.append(_at(seq, i))
                self._next = max(self._next, seq + 1)
            self._where = HashIndex.built(keys, values)

    def _learn(self, cm: dict) -> Held | None:
        """Take in one batch's ConfigMap (the caller holds `_lock`)."""
        seq = bo.seq_of(cm["metadata"]["name"])
        if seq is None:
            return None
        held = Held(parse(self.queue, seq, cm.get("data") or {}))
        old = self._batches.get(seq)
        if old is not None:
            for i, h in enumerate(old.hashes):
                if self._where.get(h) == _at(seq, i):
                    self._where.delete(h)
        self._batches[seq] = held
        for i, h in enumerate(held.hashes):
            if i in held.released:
                continue
            where = self._where.get(h)
            if where is None or where >> INDEX_BITS <= seq:
                self._where.set(h, _at(seq, i))
        return held

    def lookup(self, item_hash: str) -> Found | None:
        if not self._batches:  # none recorded (a first run): no hash to parse, no lock
            return None
        with self._lock:
            where = self._where.get(int(item_hash, 16))
            if where is None:
                return None
            held = self._batches[where >> INDEX_BITS]
        i = where & INDEX_MASK
        return Found(held.seq, i, held.state(i), held.attempts[i], held.version(i))

    def reread(self, seq: int) -> Held | None:
        """Read one batch afresh from the API server (a rival may have recorded it)."""
        cm = self.api.find("configmaps", bo.batch_name(self.queue, seq))
        if cm is None:
            return None
        with self._lock:
            return self._learn(cm)

    def batch(self, seq: int) -> Held | None:
        with self._lock:
            return self._batches.get(seq)

    def unrecorded(self) -> list[int]:
        """The batches whose outcome is not recorded yet (running, or a claim left without
        its Job), oldest first."""
        with self._lock:
            return sorted(s for s, b in self._batches.items() if not b.recorded)

    def running_members(self) -> list[tuple[str, int, int]]:
        """(name, seq, attempt) of every member an unrecorded batch still speaks for (not
        released, and that batch the newest holding it): the work a manager adopts at start."""
        out = []
        with self._lock:
            for seq, held in sorted(self._batches.items()):
                if held.recorded or held.names is None:
                    continue
                for i, name in enumerate(held.names):
                    if i not in held.released and self._where.get(held.hashes[i]) == _at(seq, i):
                        out.append((name, seq, held.attempts[i]))
        return out

    def __len__(self) -> int:
        return len(self._where)

    def holds(self, item_hash: str) -> bool:
        """Whether a batch (not released) holds the item."""
        with self._lock:
            return int(item_hash, 16) in self._where

    def count(self, leave_out: set[int]) -> dict[str, int]:
        """Items by state over every batch, but those whose hash (as an int) is in
        `leave_out`. One pass, nothing built per item (a million in about a second)."""
        out: dict[str, int] = {}
        with self._lock:
            batches = self._batches
            for item_hash, where in self._where.items():
                if item_hash in leave_out:
                    continue
                state = batches[where >> INDEX_BITS].state(where & INDEX_MASK)
                out[state] = out.get(state, 0) + 1
        return out

    # -- claiming --------------------------------------------------------------------------

    def claim(self, namespace: str, members: list[bo.Member]) -> tuple[int | None, list, list]:
        """Create the next batch for `members`: (its seq, the members it holds, those a rival's
        batch holds already). A number already taken is read and the claim tries the next;
        before each try, members a batch known here holds are left out (a rival's batch read
        after they began: they were free then). (None, [], taken) when rivals hold them all."""
        taken: list[bo.Member] = []
        with self._claiming:
            while members:
                with self._lock:  # a batch known here may hold some (read since they began)
                    seq = self._next
                    known = [int(ko.item_hash(self.queue, m.name), 16) in self._where
                             for m in members]  # fmt: skip
                taken += [m for m, k in zip(members, known, strict=True) if k]
                members = [m for m, k in zip(members, known, strict=True) if not k]
                if not members:
                    break
                body = bo.config_map(self.queue, namespace, seq, members)
                try:
                    created = self.api.create("configmaps", body)
                except KubeError as exc:
                    if exc.reason != "AlreadyExists":
                        raise
                    theirs = self.api.find("configmaps", bo.batch_name(self.queue, seq))
                    with self._lock:
                        self._next = max(self._next, seq + 1)  # known now: the next one
                        if theirs is None:  # deleted meanwhile: the number is spent anyway
                            continue
                        batch = self._learn(theirs)
                    held = set(batch.hashes) if batch is not None else set()
                    theirs_too = [int(ko.item_hash(self.queue, m.name), 16) in held
                                  for m in members]  # fmt: skip
                    taken += [m for m, t in zip(members, theirs_too, strict=True) if t]
                    members = [m for m, t in zip(members, theirs_too, strict=True) if not t]
                    continue
                with self._lock:
                    self._learn(created)
                    self._next = max(self._next, seq + 1)
                return seq, members, taken
        return None, [], taken

    # -- recording -------------------------------------------------------------------------

    def record(self, seq: int, outcomes: dict[int, tuple[str, int]]) -> Held | None:
        """The batch's outcome, once its Job has ended: `outcomes` index -> (state, attempts);
        an index not in it is failed. Idempotent: a batch recorded already (by a rival, or
        before a restart) keeps its record. None when the batch's ConfigMap is gone."""

        def change(batch: Batch) -> bool:
            if batch.states is not None:
                return False
            batch.states = []
            for i in range(len(batch.hashes)):
                state, attempts = outcomes.get(i, ("failed", batch.attempts[i]))
                batch.states.append(state)
                batch.attempts[i] = attempts
            return True

        return self._rewrite(seq, change)

    def release(self, item_hash: str) -> bool:
        """The item's batch no longer speaks for it (`workqueue retry`, a re-run): it is
        pending again. False when no batch holds it, or its batch still runs."""
        found = self.lookup(item_hash)
        if found is None or found.state == "running":
            return False

        def change(batch: Batch) -> bool:
            if found.index in batch.released:
                return False
            batch.released.add(found.index)
            return True

        self._rewrite(found.seq, change)
        with self._lock:
            key = int(item_hash, 16)
            if self._where.get(key) == _at(found.seq, found.index):
                self._where.delete(key)
        return True

    def amend(self, item_hash: str, state: str) -> bool:
        """Set a recorded item's state (a cancel after its batch ended). False when no
        recorded batch holds it."""
        found = self.lookup(item_hash)
        if found is None or found.state == "running":
            return False

        def change(batch: Batch) -> bool:
            if batch.states is None or batch.states[found.index] == state:
                return False
            batch.states[found.index] = state
            return True

        self._rewrite(found.seq, change)
        return True

    def _rewrite(self, seq: int, change) -> Held | None:
        """Read the batch's ConfigMap, apply `change(batch)` (False: nothing to write), write
        it back guarded by the resourceVersion read; a conflict reads again."""
        name = bo.batch_name(self.queue, seq)
        for _ in range(20):
            cm = self.api.find("configmaps", name)
            if cm is None:
                return None
            batch = parse(self.queue, seq, cm.get("data") or {})
            if not change(batch):
                with self._lock:
                    return self._learn(cm)
            cm["data"] = render(batch) if batch.states is not None else {
                **(cm.get("data") or {}), RELEASED_KEY: indexes_text(batch.released)
            }  # fmt: skip
            try:
                written = self.api.replace("configmaps", name, cm)
            except KubeError as exc:
                if exc.reason != "Conflict":
                    raise
                continue
            with self._lock:
                return self._learn(written)
        raise KubeError(409, "Conflict", f"batch record {name}: too many concurrent writers")
