"""One snapshot per ambassador, whatever the number of gunicorn workers - and whatever the source.

Each gunicorn worker used to build its own snapshot, so two workers could disagree: a client
saw the item count go back between two listings served by different workers. Now one process -
the *publisher*, started by `workqueue ambassador` before gunicorn - keeps the only live source
(the registry's, `sources/registry.py`: a folder with its events and settling, a bucket, a Redis
set) and publishes every version of the listing into a private folder; every worker serves the
newest version published.

    publisher:  names-000000000042   the sorted names of version 42, NUL-separated UTF-8
                meta-000000000042    for sources whose listing describes the items (an object's
                                     ETag, size, time): each name's meta, in the same order
                current              "42 names-000000000042" (replaced atomically, after the
                                     names and meta files are complete)
                heartbeat            rewritten every second while the publisher lives: "ok", or
                                     why the source cannot be read (`/readyz` answers 503)

A worker describes an item with the source type's `describe(config, name, meta)`: from the
published meta (no request to the store), or, for a folder, from one lstat of the file.
    worker:     SharedSnapshot       re-reads `current` when it changed (one stat per request)

Invariants: published versions only grow; `current` names a complete file; a worker moves only
forward. So a client's consecutive requests - whichever workers answer - never see the listing
go back in time: a later request starts after the earlier answer, which came from a version
already named by `current`, and every worker reads `current` before it answers. The version is
the list's `metadata.resourceVersion`.

Watches: a worker follows `current` (every `FOLLOW_SECONDS`) and turns each new version into
ADDED/DELETED events for its watchers, against the version they last saw - nothing missed, as a
watcher starts from the names of the version it subscribed at. For a source whose metas carry
priorities (a Redis sorted set), an item whose priority changed between the two versions is
ADDED again (its event then carries the new priority).
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import queue
import threading
import time
from typing import Any

from .sorted_names import SortedNames
from .sources.base import HoldsPacked, RanksMetas
from .sources.listed import reranked
from .sources.packed_listing import PackedListing
from .sources.registry import kind_of, open_source, source_type

log = logging.getLogger(__name__)

CURRENT = "current"
HEARTBEAT = "heartbeat"
BACKLOG = "log-backlog"  # a log source's "unread oldest-time", written with each heartbeat
FOLLOW_SECONDS = 0.05  # how often a worker with watchers looks for a new version
PUBLISH_SECONDS = 0.02  # how long the publisher gathers changes into one version
STALE_SECONDS = 10.0  # a publisher silent this long is gone: the worker is not ready
READY_SECONDS = 0.5  # how stale a worker's view of the heartbeat may be
KEEP_FILES = 4
KEEP_DELTAS = 16  # deltas are small and come fast: a worker reading one has time to finish
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
    folder: str,
    version: int,
    names: bytes = b"",
    metas: bytes | None = None,
    delta: bytes = b"",
    base: str | None = None,
) -> str:
    """Write version `version` of the listing, then point `current` at it: a new base - its
    sorted names and, for a source that has them, their metas in step, each NUL-separated
    UTF-8 - or, with `base` (a base written before), none; and `delta`, the changes over the
    base (`PackedListing.delta_blob`), when there are any. Returns the base's file name."""
    if base is None:
        base = f"names-{version:012d}"
        if metas is not None:
            _write(folder, f"meta-{version:012d}", metas)
        _write(folder, base, names)
    line = f"{version} {base}"
    if delta:
        _write(folder, f"delta-{version:012d}", delta)
        line += f" delta-{version:012d}"
    pointer = os.path.join(folder, CURRENT + ".part")
    with open(pointer, "w", encoding="ascii") as f:
        f.write(line + "\n")
    os.replace(pointer, os.path.join(folder, CURRENT))
    for kind, keep in (("names-", KEEP_FILES), ("meta-", KEEP_FILES), ("delta-", KEEP_DELTAS),
                       ("events-", KEEP_DELTAS)):  # fmt: skip
        published = sorted(n for n in os.listdir(folder) if n.startswith(kind) and "." not in n)
        for old in published[:-keep]:  # a worker still reading one keeps its open file
            os.unlink(os.path.join(folder, old))
    return base


def _write(folder: str, file_name: str, body: bytes) -> None:
    partial = os.path.join(folder, file_name + ".part")
    with open(partial, "wb") as f:
        f.write(body)
    os.replace(partial, os.path.join(folder, file_name))


class Publisher:
    """Writes each version of a listing into `folder`: a listed source's base once - and again
    only when the source folds its delta into a new one, or lists afresh - and each version's
    delta over it, so a version beside a million items costs its changes, not a copy of the
    million (written here, read by every worker); a folder's names whole each version."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        # the listing whose base is written, and the file it is in (None before the first)
        self._based: tuple[PackedListing, str] | None = None
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
        self._last = version
        if isinstance(listing, bytes):  # a folder's names, whole
            publish(self.folder, version, listing)
        elif self._based is not None and listing.shares_base(self._based[0]):
            publish(self.folder, version, delta=listing.delta_blob(), base=self._based[1])
        else:
            names, metas = listing.base_blobs()
            written = publish(self.folder, version, names, metas, listing.delta_blob())
            self._based = (listing, written)


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


def _listing_of(source, changes: queue.SimpleQueue) -> tuple[int, PackedListing | bytes,
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
    one's time (seconds since the epoch; 0 for none), which a worker turns into an age."""
    state = "ok" if source.ready() else (source.problem or "the source cannot be read")
    _write_line(path, state.replace("\n", " "))
    backlog = getattr(source, "backlog", None)
    figures = backlog() if backlog is not None else None
    if figures is not None:
        unread, age = figures
        oldest = time.time() - age if age > 0 else 0.0
        _write_line(os.path.join(os.path.dirname(path), BACKLOG), f"{unread} {oldest:.3f}")


def _write_line(path: str, line: str) -> None:
    with open(path + ".part", "w", encoding="utf-8") as f:
        f.write(line)
    os.replace(path + ".part", path)


def _drain(q: queue.SimpleQueue) -> None:
    while True:
        try:
            q.get_nowait()
        except queue.Empty:
            return


def _event(kind: str, name: bytes) -> dict:
    return {"type": kind, "item": name.decode("utf-8")}


# -- the workers ---------------------------------------------------------------------------


class SharedSnapshot:
    """The source of a gunicorn worker: the publisher's newest listing (see the module
    docstring), with the Source interface of `sources/base.py`."""

    def __init__(self, folder: str, config: dict) -> None:
        self.folder = folder
        self.config = config
        self.kind = source_type(kind_of(config))
        self._lock = threading.Lock()
        # Invariant (under _lock): _listing is version _version - the base read from
        # _base_file (its names sorted, its metas in step, none for a source that publishes
        # none) with that version's delta over it; every version read over one base shares
        # it (`PackedListing.shares_base`); _stamp identifies the `current` file read.
        self._listing = PackedListing()
        self._base_file: str | None = None
        self._version = 0
        self._stamp: tuple[int, int, int] | None = None
        self._watchers: dict[queue.SimpleQueue, int] = {}  # queue -> version it has seen
        # Invariant: holds the listing of every version some watcher is at (listings over one
        # base share it: a version costs its delta); built only while there are watchers.
        self._seen: dict[int, PackedListing] = {}
        self._added: tuple[int, bytes] | None = None  # (version, its ADDED lines) for watches
        self._follower: threading.Thread | None = None
        self._stop = threading.Event()
        self._problem: str | None = None
        self._ready_at = -READY_SECONDS

    def start(self) -> None:
        self._refresh()

    def stop(self, wait: bool = True) -> None:
        self._stop.set()  # (its follower ends by itself within FOLLOW_SECONDS)

    def settling(self) -> int:
        return 0  # the publisher publishes listed items only

    # -- reading the newest version --------------------------------------------------------

    def _refresh(self) -> None:
        """Move to the newest published version, if `current` changed since the last look:
        its delta alone when its base is the one held, else its base and its delta."""
        pointer = os.path.join(self.folder, CURRENT)
        try:
            st = os.stat(pointer)
        except FileNotFoundError:
            return
        stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        if stamp == self._stamp:
            return
        with self._lock:
            if stamp == self._stamp:
                return
            with open(pointer, encoding="ascii") as f:
                version_text, base_file, *delta_file = f.read().split()
            version = int(version_text)
            if version <= self._version:
                self._stamp = stamp
                return
            try:
                base = self._listing if base_file == self._base_file else self._base(base_file)
                delta = b""
                if delta_file:
                    with open(os.path.join(self.folder, delta_file[0]), "rb") as f:
                        delta = f.read()
            except FileNotFoundError:
                return  # superseded while we looked: the next look finds the newer one
            self._listing, self._base_file = base.over(delta), base_file
            self._version, self._stamp = version, stamp

    def _base(self, file_name: str) -> PackedListing:
        """The base published in `file_name` (and its metas, where the source has them)."""
        with open(os.path.join(self.folder, file_name), "rb") as f:
            raw = f.read()
        raw.decode("utf-8")  # the publisher writes UTF-8: anything else is a torn file
        metas = b""
        try:
            with open(os.path.join(self.folder, "meta-" + file_name.removeprefix("names-")),
                      "rb") as f:  # fmt: skip
                metas = f.read()
        except FileNotFoundError:
            pass  # a source whose items are described afresh (a folder)
        return PackedListing(SortedNames(raw), SortedNames(metas))  # metas: read by index only

    def _current(self) -> tuple[PackedListing, int]:
        self._refresh()
        with self._lock:
            return self._listing, self._version  # (a version's listing never changes)

    # -- the Source interface --------------------------------------------------------------

    def page(self, after: str | None, limit: int | None) -> tuple[list[str], int, int]:
        listing, version = self._current()
        page, remaining = listing.page(after, limit)
        return page, remaining, version

    def json_names(self) -> tuple[bytes, int]:
        """Every name as a JSON array (built once a version), and the version."""
        listing, version = self._current()
        return listing.names.json_array(), version

    @property
    def ranks(self) -> bool:
        """`sources.base.Ranks`: whether the source type reads priorities from metas."""
        return isinstance(self.kind, RanksMetas) and self.kind.ranks(self.config)

    def priorities(self, names: list[str] | None) -> dict[str, int]:
        if not self.ranks:
            return {}
        return self._ranked(self._current()[0], names)

    def _ranked(self, listing: PackedListing, names: list[str] | None) -> dict[str, int]:
        """The priorities (not 0) of `names` in `listing` (None: every item's)."""
        priority = self.kind.priority
        out = {}
        if names is None:
            merged = listing.merged()
            all_names, metas = merged.names, merged.metas
            for index in range(len(metas)):
                found = priority(metas[index])
                if found:
                    out[all_names[index]] = found
            return out
        for name in names:
            meta = listing.meta(name)
            found = None if not meta else priority(meta)
            if found:
                out[name] = found
        return out

    def get(self, name: str) -> dict[str, Any] | None:
        listing, _ = self._current()
        meta = listing.meta(name)
        if meta is None:
            return None
        return self.kind.describe(self.config, name, meta or None)

    def __len__(self) -> int:
        return len(self._listing)

    @property
    def version(self) -> int:
        """The newest published version (after looking for a newer one)."""
        self._refresh()
        return self._version

    def ready(self) -> bool:
        return self.problem is None

    @property
    def problem(self) -> str | None:
        """Why the source cannot be served now (the publisher's heartbeat, read at most every
        READY_SECONDS: every request asks), or None."""
        now = time.monotonic()
        if now - self._ready_at >= READY_SECONDS:
            self._problem, self._ready_at = self._read_heartbeat(), now
        return self._problem

    def _read_heartbeat(self) -> str | None:
        path = os.path.join(self.folder, HEARTBEAT)
        try:
            beat = os.stat(path).st_mtime
            with open(path, encoding="utf-8") as f:
                state = f.read().strip()
        except FileNotFoundError:
            return "the snapshot publisher has not started"
        if time.time() - beat >= STALE_SECONDS:
            return "the snapshot publisher is not answering"
        return None if state == "ok" else state

    def backlog(self) -> tuple[int, float] | None:
        """A log source's backlog as the publisher last wrote it (`_beat`): (records read and
        not yet served, the oldest one's age in seconds); None for any other source."""
        try:
            with open(os.path.join(self.folder, BACKLOG), encoding="utf-8") as f:
                unread, oldest = f.read().split()
        except (FileNotFoundError, ValueError):
            return None
        age = max(0.0, time.time() - float(oldest)) if float(oldest) > 0 else 0.0
        return int(unread), age

    def subscribe(self) -> tuple[list[str], queue.SimpleQueue]:
        """Every current name, and a queue of each later event. The caller's duty:
        `unsubscribe(q)`."""
        self._refresh()
        q: queue.SimpleQueue = queue.SimpleQueue()
        with self._lock:
            self._watch_from_now(q)
            names = self._listing.page(None, None)[0]
        return names, q

    def subscribe_events(self) -> queue.SimpleQueue:
        """A queue of each change after the current version (a watch pages the names
        itself). The caller's duty: `unsubscribe(q)`."""
        self._refresh()
        q: queue.SimpleQueue = queue.SimpleQueue()
        with self._lock:
            self._watch_from_now(q)
        return q

    def subscribe_lines(self) -> tuple[bytes, queue.SimpleQueue]:
        """As `subscribe`, with the current names already as the stream's ADDED lines: built
        once a version and shared by every watch (3,000 watches each joining 10,000 lines of
        their own cost 25 ms of the interpreter apiece, and memory they never gave back). The
        caller's duty: `unsubscribe(q)`."""
        self._refresh()
        q: queue.SimpleQueue = queue.SimpleQueue()
        with self._lock:
            self._watch_from_now(q)
            if self._added is None or self._added[0] != self._version:
                self._added = (self._version, self._listing.names.added_lines())
            lines = self._added[1]
        return lines, q

    def _watch_from_now(self, q: queue.SimpleQueue) -> None:
        """`q` gets every change after the current version, told by the follower thread,
        started with the first watch. The caller holds `_lock`."""
        self._watchers[q] = self._version
        self._seen.setdefault(self._version, self._listing)
        if self._follower is None:
            self._follower = threading.Thread(
                target=self._follow, name="ambassador-follow", daemon=True
            )
            self._follower.start()

    def unsubscribe(self, q: queue.SimpleQueue) -> None:
        with self._lock:
            self._watchers.pop(q, None)

    def _follow(self) -> None:
        """Turn each new version into events for the watchers, each against the version it
        last saw (see the module docstring): over one base from the two deltas, across a new
        base by comparing the merged names a run at a time."""
        while not self._stop.wait(FOLLOW_SECONDS):
            self._refresh()
            with self._lock:
                current, listing = self._version, self._listing
                for since in {v for v in self._watchers.values() if v < current}:
                    events = self._told(since, current)
                    if events is None:  # not written (a folder), or no longer kept
                        events = self._events(self._seen[since], listing)
                    for q, seen in list(self._watchers.items()):
                        if seen == since:
                            for event in events:
                                q.put(event)
                            self._watchers[q] = current
                self._seen[current] = listing
                wanted = set(self._watchers.values())
                self._seen = {v: seen for v, seen in self._seen.items() if v in wanted}

    def _told(self, since: int, current: int) -> list[dict] | None:
        """The events the publisher wrote from version `since` to `current` (each file says
        the version before it: a chain back to `since`), or None where a link is not there."""
        chunks: list[list[str]] = []
        version = current
        while version > since:
            try:
                with open(os.path.join(self.folder, f"events-{version:012d}"), "rb") as f:
                    before, *lines = f.read().decode("utf-8", "surrogateescape").split("\n")
            except FileNotFoundError:
                return None
            chunks.append(lines)
            version = int(before)
        if version != since:
            return None
        return [json.loads(line) for lines in reversed(chunks) for line in lines]

    def _events(self, older: PackedListing, newer: PackedListing) -> list[dict]:
        """The events from `older` to `newer`: DELETED for the names gone, ADDED for those
        that came - and, for a source that ranks its items, for those whose priority moved."""
        added, removed, described = newer.changes_since(older)
        if self.ranks:  # a new priority: the item is ADDED again
            if described is None:  # across bases: every priority, both sides
                moved = reranked(self._ranked(older, None), self._ranked(newer, None))
                described = [n for n in moved if n in newer and n in older]
            else:
                rank = self.kind.priority
                described = [
                    n for n in described
                    if rank(older.meta(n) or "") != rank(newer.meta(n) or "")
                ]  # fmt: skip
            added = sorted({*added, *described})
        return [*({"type": "DELETED", "item": n} for n in removed),
                *({"type": "ADDED", "item": n} for n in added)]  # fmt: skip


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
