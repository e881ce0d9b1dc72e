"""One snapshot per ambassador, whatever the number of gunicorn workers - and whatever the source.

Each gunicorn worker used to build its own snapshot, so two workers could disagree: a client
saw the item count go back between two listings served by different workers. Now one process -
the *publisher*, started by `workqueue ambassador` before gunicorn - keeps the only live source
(the registry's, `sources/registry.py`: a folder with its events and settling, a bucket, a Redis
set) and publishes every version of the listing into a private folder; every worker serves the
newest version published.

    publisher:  names-000000000042   a base: the sorted names, NUL-separated UTF-8
                meta-000000000042    for sources whose listing describes the items (an object's
                                     ETag, size, time): each name's meta, in the same order
                delta-000000000056   version 56's whole delta over that base (name, + ~ or -,
                                     meta: `sources/delta_format.py`), for a listed source -
                                     every WHOLE_EVERY versions, and over each new base
                changes-000000000057 the version before it (first line), then the entries of
                                     the delta that changed since that version (= for a name
                                     back as the base has it)
                events-000000000057  the version published before it (first line), then the
                                     events the source told its own watchers between the two,
                                     one JSON line each
                current              "57 names-000000000042 delta-000000000056" (replaced
                                     atomically, after the files it names are complete), and
                                     " coming:names-000000000056" after it while a base written
                                     for the versions to come waits to be used
                heartbeat            rewritten every second while the publisher lives: "ok", or
                                     why the source cannot be read (`/readyz` answers 503)

A listed source's base is written once, and again only when the source folds its delta into a
new one (every 1/64 of the listing's changes) or lists afresh: beside a million items a version
costs its changes - a whole copy a version (90 MB at a million log records, read again by every
worker) made a Redis stream's records wait 20-35 s at 1,000 a second over HTTP - and so does the
delta: written whole each version it grew to 15,600 entries before a fold, a fifth of the
publisher's time and a quarter of each worker's. A version is its changes to the delta; a worker
applies them to the delta it holds. A fold's base is written beside the versions, not in their
way: a thread writes it while they go on over the base before (the folded delta and the new one
as one delta), `current` names it as coming for LEAD_SECONDS - each worker reads it ahead, in a
thread - and only then do versions use it (`Publisher`). A folder's names (no delta, no metas)
are written whole each version.

A worker describes an item with the source type's `describe(config, name, meta)`: from the
published meta (no request to the store), or, for a folder, from one lstat of the file.
    worker:     SharedSnapshot       (`shared_snapshot.py`) re-reads `current` when it
                                     changed (one stat a request): the changes since the
                                     version it holds, or a whole delta and the changes
                                     since, over the base it holds or a new base (read
                                     ahead when it was named as coming)

Invariants: published versions only grow; `current` names a complete file; a worker moves only
forward. So a client's consecutive requests - whichever workers answer - never see the listing
go back in time: a later request starts after the earlier answer, which came from a version
already named by `current`, and every worker reads `current` before it answers. The version is
the list's `metadata.resourceVersion`.

Watches: a worker follows `current` (every `FOLLOW_SECONDS`) and hands its watchers the events
from the version they last saw to the newest: those the publisher wrote, following the chain of
events files back to that version - what the source told its own watchers, in order - or,
where a link is missing (a folder's, or one no longer kept), the difference of the two
listings (over one base from their deltas; across bases by comparing the names a run at a
time). Nothing is missed, as a watcher starts from the names of the version it subscribed at.
For a source whose metas carry priorities (a Redis sorted set), an item whose priority changed
is ADDED again (its event then carries the new priority).
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import queue
import threading
import time
from collections.abc import Mapping

from .sources import delta_format
from .sources.base import CountsBacklog, DescribesLog, HoldsPacked
from .sources.delta_format import Entry
from .sources.packed_listing import PackedListing
from .sources.registry import open_source
from .timed_queue import TimedQueue

log = logging.getLogger(__name__)

CURRENT = "current"
HEARTBEAT = "heartbeat"
BACKLOG = "log-backlog"  # a log source's "unread oldest-time", written with each heartbeat
LOG_FACTS = "log-facts"  # a log source's identity (JSON: `metadata.log`), with each heartbeat
FOLLOW_SECONDS = 0.05  # how often a worker with watchers looks for a new version
PUBLISH_SECONDS = 0.02  # how long the publisher gathers changes into one version
STALE_SECONDS = 10.0  # a publisher silent this long is gone: the worker is not ready
READY_SECONDS = 0.5  # how stale a worker's view of the heartbeat may be
KEEP_FILES = 4
KEEP_DELTAS = 16  # deltas are small and come fast: a worker reading one has time to finish
WHOLE_EVERY = 8  # a version's whole delta is written every this many versions (KEEP_DELTAS >)
LEAD_SECONDS = 0.5  # how long a fold's new base is named as coming before versions use it
COMING = "coming:"  # `current`'s word before such a base
DELTA = "delta-"  # a version's whole delta over its base
CHANGES = "changes-"  # a version's changes to the delta of the version before
_M_MMAP_THRESHOLD = -3  # mallopt's parameter (glibc's malloc.h)


def large_blocks_go_back() -> None:
    """Make the C allocator hand every block of 128 KiB or more back to the system when it is
    freed - as glibc does until the first such block is freed, after which it raises that
    threshold to the block's size (up to 32 MiB) and keeps later ones in its heap. The listings
    here are exactly such blocks, a new one each version: with the raised threshold a worker
    kept the holes of earlier versions (115 bytes an item at 100,000 objects against 63
    without; bench/object_store.py). Process-wide, so called once where a process starts (the
    server before it forks its workers, the publisher); a no-op where libc is not glibc."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(_M_MMAP_THRESHOLD, 128 * 1024)  # setting it turns the raising off
    except (OSError, AttributeError):
        return


# -- the publisher -------------------------------------------------------------------------


def publish(
    folder: str, version: int, base: str, whole: int | None = None, coming: str | None = None
) -> None:
    """Point `current` at version `version` of the listing, whose files are written: its base
    (`names-`, and `meta-` beside it where the source has metas); `whole`, the version whose
    whole delta (`delta-`) the worker reads over the base, the changes files written since
    taking it on to this one (a listed source's; None for a folder's names, which are whole);
    `coming`, a base written for the versions to come, which workers may read ahead. Then
    the files no worker will ask for are removed."""
    line = f"{version} {base}"
    if whole is not None:
        line += f" {DELTA}{whole:012d}"
    if coming:
        line += f" {COMING}{coming}"
    pointer = os.path.join(folder, CURRENT + ".part")
    with open(pointer, "w", encoding="ascii") as f:
        f.write(line + "\n")
    os.replace(pointer, os.path.join(folder, CURRENT))
    written = sorted(n for n in os.listdir(folder) if "." not in n)  # (not a `.part`)
    for kind, keep in (("names-", KEEP_FILES), ("meta-", KEEP_FILES), (DELTA, KEEP_FILES),
                       (CHANGES, KEEP_DELTAS), ("events-", KEEP_DELTAS)):  # fmt: skip
        published = [n for n in written if n.startswith(kind)]
        for old in published[:-keep]:  # a worker still reading one keeps its open file
            os.unlink(os.path.join(folder, old))


def base_name(version: int) -> str:
    """The file of a base first written with version `version`."""
    return f"names-{version:012d}"


def _write_base(folder: str, base: str, names: bytes, metas: bytes | None) -> None:
    if metas is not None:
        _write(folder, "meta-" + base.removeprefix("names-"), metas)
    _write(folder, base, names)


def _write(folder: str, file_name: str, body: bytes) -> None:
    partial = os.path.join(folder, file_name + ".part")
    with open(partial, "wb") as f:
        f.write(body)
    os.replace(partial, os.path.join(folder, file_name))


class Publisher:
    """Writes each version of a listing into `folder`: a listed source's base once - and again
    only when the source folds its delta into a new one, or lists afresh - and each version's
    changes to the delta over it, the whole delta every WHOLE_EVERY versions, so a version
    beside a million items costs what changed, not a copy of the million nor of the delta
    (written here, read by every worker); a folder's names whole each version.

    A fold's new base is written by a thread of its own while the versions go on over the
    base before (`PackedListing.delta_over`: the folded delta and the new one as one), then
    named in `current` as coming for `lead` seconds - time for each worker to read it ahead -
    and only then used."""

    def __init__(self, folder: str, lead: float = LEAD_SECONDS) -> None:
        self.folder = folder
        self.lead = lead
        # Invariant: `_based` is the listing whose base is written and the file it is in (None
        # before the first); `_sent` the delta over that base of the version written last
        # (None: none yet over it), `_whole` the version whose whole delta over it was
        # written last; `_next`, when not None, is a fold's listing whose base a thread is
        # writing into the file beside it, and the time it was first named as coming (None
        # before) - only once the thread ended (`_next_done`).
        self._based: tuple[PackedListing, str] | None = None
        self._sent: Mapping[str, Entry] | None = None
        self._whole = 0
        self._next: list | None = None  # [listing, file, thread, first named]
        self._last: int | None = None  # the version written last

    def write(
        self, version: int, listing: PackedListing | bytes, told: list[dict] | None = None
    ) -> None:
        """Publish `listing` as `version` (above every version written before), and `told`:
        the events that take a watcher from the version written before to this one (None:
        not known - a worker then compares the two listings)."""
        if told is not None and self._last is not None:
            lines = [json.dumps(e, ensure_ascii=False, separators=(",", ":")) for e in told]
            body = "\n".join([str(self._last), *lines]).encode("utf-8", "surrogateescape")
            _write(self.folder, f"events-{version:012d}", body)
        last, self._last = self._last, version
        if isinstance(listing, bytes):  # a folder's names, whole
            _write_base(self.folder, base_name(version), listing, None)
            publish(self.folder, version, base_name(version))
            return
        coming = None
        based = self._based
        if based is not None and listing.shares_base(based[0]) or self._switch(listing):
            entries = listing.delta()
        else:
            entries = None if based is None else listing.delta_over(based[0])
            if entries is None:  # a first listing, a new listing, or a fold not of ours
                self._next = None  # (a thread writing a base no longer wanted: left alone)
                names, metas = listing.base_blobs()
                file_name = base_name(version)
                _write_base(self.folder, file_name, names, metas)
                self._based, self._sent, entries = (listing, file_name), None, listing.delta()
            else:
                coming = self._fold(version, listing)
        self._write_delta(version, last, entries)
        publish(self.folder, version, base=self._based[1], whole=self._whole, coming=coming)

    def _write_delta(self, version: int, last: int | None, entries: Mapping[str, Entry]) -> None:
        """This version's delta over the base written: whole, every WHOLE_EVERY versions and
        over a new base; else its changes since the version before (`delta_format`)."""
        if self._sent is None or last is None or version - self._whole >= WHOLE_EVERY:
            _write(self.folder, f"{DELTA}{version:012d}", delta_format.encode(entries))
            self._whole = version
        else:
            changes = delta_format.encode(delta_format.changes(self._sent, entries))
            _write(self.folder, f"{CHANGES}{version:012d}", f"{last}\n".encode() + changes)
        self._sent = entries

    def _fold(self, version: int, listing: PackedListing) -> str | None:
        """A fold of the base written: its new base in a thread, started once; the file to
        name as coming once it is written."""
        if self._next is None:
            file_name = base_name(version)
            names, metas = listing.base_blobs()
            thread = threading.Thread(
                target=_write_base,
                name="ambassador-base",
                daemon=True,
                args=(self.folder, file_name, names, metas),
            )
            thread.start()
            self._next = [listing, file_name, thread, None]
        if not self._next_done():
            return None
        if self._next[3] is None:
            self._next[3] = time.monotonic()
        return self._next[1]

    def _next_done(self) -> bool:
        return self._next is not None and not self._next[2].is_alive()

    def _switch(self, listing: PackedListing) -> bool:
        """Take the fold's new base as the base written, when `listing` is over it, it is
        written and it has been named as coming for `lead` seconds; whether it did."""
        if not self._next_done() or not listing.shares_base(self._next[0]):
            return False
        named = self._next[3]
        if named is None or time.monotonic() - named < self.lead:
            return False
        self._based, self._sent, self._next = (listing, self._next[1]), None, None
        return True

    def settle(self, timeout: float | None = None) -> None:
        """Wait for a fold's base being written (tests; the publisher's life never waits)."""
        if self._next is not None:
            self._next[2].join(timeout)


def run_publisher(config: dict, folder: str, stop: threading.Event | None = None) -> None:
    """The publisher's life: start the source, publish its first listing, then a new version
    whenever the listing changes, until `stop` (SIGTERM), or until the server that started it
    is gone (killed before it could stop us: we must not outlive it)."""
    stop = stop or threading.Event()
    parent = os.getppid()  # the server that started us: if it dies, so do we
    source = open_source(config)
    source.start()
    # a listed source's events are what its versions' watchers are told (`Publisher.write`);
    # a folder's only wake us
    changes = source.subscribe_events()
    seen: int | None = None  # the snapshot version last published
    publisher = Publisher(folder)
    beat = 0.0
    woken: list[dict] = []  # the event that woke us, taken from `changes`
    try:
        while not stop.is_set() and os.getppid() == parent:
            current, listing, events = _listing_of(source, changes)
            if current != seen:  # the snapshot's versions only grow; + 1 keeps ours above 0
                told = None if events is None or seen is None else woken + events
                publisher.write(current + 1, listing, told)
                seen = current
            woken = []
            if time.monotonic() - beat >= 1.0:
                _beat(os.path.join(folder, HEARTBEAT), source)
                beat = time.monotonic()
            try:
                woken.append(changes.get(timeout=0.5))
            except queue.Empty:
                continue
            time.sleep(PUBLISH_SECONDS)  # gather a burst into one version
            if events is None:
                _drain(changes)
    finally:
        source.unsubscribe(changes)
        source.stop()


def _listing_of(source, changes: TimedQueue) -> tuple[int, PackedListing | bytes,
                                                             list[dict] | None]:  # fmt: skip
    """(version, its listing, the events up to it from `changes`): a listed source's listing
    as it holds it, packed as a base and a delta (sources/listed.py); a folder's names joined
    here (it has no metas), written whole, and no events (a diff tells its watchers)."""
    if isinstance(source, HoldsPacked):
        return source.published(changes)
    names, _, version = source.page(None, None)
    return version, "\0".join(names).encode("utf-8"), None


def _beat(path: str, source) -> None:
    """The heartbeat: "ok" while the source can be read, else why not (one line); and beside
    it, for a log source, its backlog: the records read and not yet served, and the oldest
    one's time (seconds since the epoch; 0 for none), which a worker turns into an age. The
    backlog first: a worker is ready once the first heartbeat is there, and its `/metrics`
    then has the backlog (a scrape between the two writes found none)."""
    figures = source.backlog() if isinstance(source, CountsBacklog) else None
    if figures is not None:
        unread, age = figures
        oldest = time.time() - age if age > 0 else 0.0
        _write_line(os.path.join(os.path.dirname(path), BACKLOG), f"{unread} {oldest:.3f}")
    facts = source.log_facts() if isinstance(source, DescribesLog) else None
    if facts is not None:  # (a log's identity, beside the backlog: `metadata.log`)
        _write_line(os.path.join(os.path.dirname(path), LOG_FACTS), json.dumps(facts))
    state = "ok" if source.ready() else (source.problem or "the source cannot be read")
    _write_line(path, state.replace("\n", " "))


class BesideHeartbeat:
    """What the publisher writes beside its heartbeat, as a worker reads it: a log source's
    backlog and its identity (`_beat`)."""

    def __init__(self, folder: str) -> None:
        self.folder = folder

    def backlog(self) -> tuple[int, float] | None:
        """(records read and not yet served, the oldest one's age in seconds), or None."""
        try:
            with open(os.path.join(self.folder, BACKLOG), encoding="utf-8") as f:
                unread, oldest = f.read().split()
        except (FileNotFoundError, ValueError):
            return None
        age = max(0.0, time.time() - float(oldest)) if float(oldest) > 0 else 0.0
        return int(unread), age

    def log_facts(self) -> dict | None:
        """The log's identity and its last start over (`metadata.log`), or None."""
        try:
            with open(os.path.join(self.folder, LOG_FACTS), encoding="utf-8") as f:
                return json.loads(f.read())
        except (FileNotFoundError, ValueError):
            return None


def _write_line(path: str, line: str) -> None:
    with open(path + ".part", "w", encoding="utf-8") as f:
        f.write(line)
    os.replace(path + ".part", path)


def _drain(q: TimedQueue) -> None:
    while True:
        try:
            q.get_nowait()
        except queue.Empty:
            return


if (
    __name__ == "__main__"
):  # the publisher: python -m kube_workqueue.ambassador.publication FOLDER < CONFIG (JSON)
    import signal
    import sys

    large_blocks_go_back()
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    signal.signal(signal.SIGINT, lambda *_: stopping.set())
    config = json.loads(sys.stdin.buffer.read())  # (never an argument: it may hold a password)
    run_publisher(config, sys.argv[1], stopping)
