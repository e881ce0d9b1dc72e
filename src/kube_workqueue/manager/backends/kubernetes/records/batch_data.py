"""One batch's ConfigMap data, in both its forms, and a batch as a manager keeps it in memory.

A batch's ConfigMap (`batch_record.py`: first the claim on its members, then the durable record
of their outcomes) holds one of two forms:

    while the Job runs     data "0", "1", … the members' item data; "members" one JSON line
                           per index: [name, version, attempt]
    once it has ended      "record": one line per index, `hash \\t state \\t attempts \\t
                           version` (state s, f or c: succeeded, failed, cancelled); the item
                           data is gone. About 40 bytes an item: 1,000,000 items in 1,000
                           ConfigMaps of 40 kB, where etcd's 1 MiB per object is no limit
    "released"             indexes whose item was taken back (`workqueue retry`, a re-run):
                           the batch no longer speaks for them

`parse` reads either form into a `Batch`; `render` writes a recorded one. `Held` is what the
manager keeps of a batch between reads: a few bytes an item, so knowing 1,000,000 finished
items stays small. A state the record does not know reads as failed, never as succeeded.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field

from ..manifests import batch_objects as bo
from ..manifests import objects as ko

STATES = {"s": "succeeded", "f": "failed", "c": "cancelled"}
CODES = {v: k for k, v in STATES.items()}
RECORD_KEY = "record"
RELEASED_KEY = "released"


@dataclass
class Batch:
    """One batch as read: its members' hashes and versions, and - once recorded - their
    outcomes."""

    seq: int
    hashes: list[str]
    versions: list[str | None]
    attempts: list[int]
    states: list[str] | None = None  # None: its Job has not ended (or not been recorded)
    released: set[int] = field(default_factory=set)
    names: list[str] | None = None  # while it runs (the claim names them)


class Held:
    """One batch as this manager keeps it in memory: a few bytes an item (hashes as 64-bit
    ints, outcomes and attempts as bytes, versions as one string when they are of one length;
    see `hash_index`). `names` only while it runs (its claim names them)."""

    __slots__ = ("seq", "size", "hashes", "_versions", "_width", "attempts", "codes",
                 "released", "names")  # fmt: skip

    def __init__(self, batch: Batch) -> None:
        self.seq = batch.seq
        self.size = len(batch.hashes)
        self.hashes = array("Q", (int(h, 16) for h in batch.hashes))
        versions = batch.versions
        widths = {len(v) for v in versions if v is not None}
        if None not in versions and len(widths) == 1:
            self._width = widths.pop()
            self._versions: str | tuple = "".join(versions)  # type: ignore[arg-type]
        else:
            self._width = 0
            self._versions = tuple(versions)
        self.attempts = bytes(min(255, a) for a in batch.attempts)
        self.codes = None if batch.states is None else "".join(CODES.get(s, "f") for s in
                                                               batch.states)  # fmt: skip
        self.released = frozenset(batch.released)
        self.names = batch.names if batch.states is None else None

    @property
    def recorded(self) -> bool:
        return self.codes is not None

    def state(self, i: int) -> str:
        return "running" if self.codes is None else STATES.get(self.codes[i], "failed")

    def version(self, i: int) -> str | None:
        if self._width:
            return self._versions[i * self._width : (i + 1) * self._width]  # type: ignore[index]
        return self._versions[i]  # type: ignore[index]

    def hash_hex(self, i: int) -> str:
        return f"{self.hashes[i]:016x}"


def parse(queue: str, seq: int, data: dict[str, str]) -> Batch:
    """One batch's ConfigMap data, in either form (see the module docstring)."""
    released = {int(x) for x in (data.get(RELEASED_KEY) or "").split()}
    if RECORD_KEY in data:
        hashes, versions, attempts, states = [], [], [], []
        for line in data[RECORD_KEY].splitlines():
            h, code, tries, version = line.split("\t")
            hashes.append(h)
            states.append(STATES.get(code, "failed"))
            attempts.append(int(tries))
            versions.append(version or None)
        return Batch(seq, hashes, versions, attempts, states, released)
    members = bo.parse_members(data.get(bo.MEMBERS_KEY) or "")
    return Batch(
        seq,
        [ko.item_hash(queue, name) for name, _, _ in members],
        [version for _, version, _ in members],
        [attempt for _, _, attempt in members],
        None,
        released,
        [name for name, _, _ in members],
    )


def render(batch: Batch) -> dict[str, str]:
    """A recorded batch's ConfigMap data: the item data gone, one line per member."""
    lines = [
        f"{h}\t{CODES.get(state, 'f')}\t{tries}\t{version or ''}"
        for h, state, tries, version in zip(
            batch.hashes, batch.states or [], batch.attempts, batch.versions, strict=True
        )
    ]
    data = {RECORD_KEY: "\n".join(lines)}
    if batch.released:
        data[RELEASED_KEY] = indexes_text(batch.released)
    return data


def indexes_text(indexes: set[int]) -> str:
    """Indexes as the "released" key writes them: in order, space-separated."""
    return " ".join(str(i) for i in sorted(indexes))
