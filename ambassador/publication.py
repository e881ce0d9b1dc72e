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
import logging
import os
import queue
import threading
import time
from typing import Any

from .sorted_names import SortedNames
from .sources.base import HoldsPacked, RanksMetas
from .sources.listed import reranked
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


def publish(folder: str, version: int, names: bytes, metas: bytes | None = None) -> None:
    """Write version `version` of the listing - its sorted names and, for a source that has
    them, their metas in step, each NUL-separated UTF-8 - then point `current` at it."""
    file_name = f"names-{version:012d}"
    if metas is not None:
        _write(folder, f"meta-{version:012d}", metas)
    _write(folder, file_name, names)
    pointer = os.path.join(folder, CURRENT + ".part")
    with open(pointer, "w", encoding="ascii") as f:
        f.write(f"{version} {file_name}\n")
    os.replace(pointer, os.path.join(folder, CURRENT))
    for kind in ("names-", "meta-"):
        published = sorted(n for n in os.listdir(folder) if n.startswith(kind) and "." not in n)
        for old in published[:-KEEP_FILES]:  # a worker still reading one keeps its open file
            os.unlink(os.path.join(folder, old))


def _write(folder: str, file_name: str, body: bytes) -> None:
    partial = os.path.join(folder, file_name + ".part")
    with open(partial, "wb") as f:
        f.write(body)
    os.replace(partial, os.path.join(folder, file_name))


def run_publisher(config: dict, folder: str, stop: threading.Event | None = None) -> None:
    """The publisher's life: start the source, publish its first listing, then a new version
    whenever the listing changes, until `stop` (SIGTERM), or until the server that started it
    is gone (killed before it could stop us: we must not outlive it)."""
    stop = stop or threading.Event()
    parent = os.getppid()  # the server that started us: if it dies, so do we
    source = open_source(config)
    source.start()
    changes = source.subscribe()[1]  # only to be woken: the names are not kept (a million)
    seen: int | None = None  # the snapshot version last published
    beat = 0.0
    try:
        while not stop.is_set() and os.getppid() == parent:
            current, names, metas = _listing_of(source)
            if current != seen:  # the snapshot's versions only grow; + 1 keeps ours above 0
                publish(folder, current + 1, names, metas)
                seen = current
            if time.monotonic() - beat >= 1.0:
                _beat(os.path.join(folder, HEARTBEAT), source)
                beat = time.monotonic()
            try:
                changes.get(timeout=0.5)
            except queue.Empty:
                continue
            time.sleep(PUBLISH_SECONDS)  # gather a burst into one version
            _drain(changes)
    finally:
        source.unsubscribe(changes)
        source.stop()


def _listing_of(source) -> tuple[int, bytes, bytes | None]:
    """(version, names, metas or None) as `publish` writes them: a listed source holds them
    packed already (sources/listed.py); a folder's names are joined here (it has no metas)."""
    if isinstance(source, HoldsPacked):
        return source.published()
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
        # Invariant (under _lock): _names holds the names of _version, sorted, compactly
        # (sorted_names.py), and _metas their metas in the same order (empty for a source
        # that publishes none); _stamp identifies the `current` file they were read from.
        self._names = SortedNames()
        self._metas = SortedNames()
        self._version = 0
        self._stamp: tuple[int, int, int] | None = None
        self._watchers: dict[queue.SimpleQueue, int] = {}  # queue -> version it has seen
        # Invariant: holds the names (as UTF-8 sets) of every version some watcher is at;
        # built only while there are watchers.
        self._sets: dict[int, frozenset[bytes]] = {}
        # Invariant: for a source that ranks its items, the priorities (not 0, by UTF-8 name)
        # of every version in `_sets`: an item whose priority changed is ADDED again.
        self._ranks: dict[int, dict[bytes, int]] = {}
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
        """Move to the newest published version, if `current` changed since the last look."""
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
                version_text, file_name = f.read().split()
            version = int(version_text)
            if version <= self._version:
                self._stamp = stamp
                return
            try:
                with open(os.path.join(self.folder, file_name), "rb") as f:
                    raw = f.read()
            except FileNotFoundError:
                return  # superseded while we looked: the next look finds the newer one
            raw.decode("utf-8")  # the publisher writes UTF-8: anything else is a torn file
            metas = b""
            meta_file = os.path.join(self.folder, "meta-" + file_name.removeprefix("names-"))
            try:
                with open(meta_file, "rb") as f:
                    metas = f.read()
            except FileNotFoundError:
                pass  # a source whose items are described afresh (a folder)
            self._names, self._version = SortedNames(raw), version
            self._metas = SortedNames(metas)  # not sorted: read by index only
            self._stamp = stamp

    # -- the Source interface --------------------------------------------------------------

    def page(self, after: str | None, limit: int | None) -> tuple[list[str], int, int]:
        self._refresh()
        with self._lock:
            names, version = self._names, self._version  # (a version's names never change)
        page, remaining = names.page(after, limit)
        return page, remaining, version

    def json_names(self) -> tuple[bytes, int]:
        """Every name as a JSON array (built once a version), and the version."""
        self._refresh()
        with self._lock:
            names, version = self._names, self._version
        return names.json_array(), version

    @property
    def ranks(self) -> bool:
        """`sources.base.Ranks`: whether the source type reads priorities from metas."""
        return isinstance(self.kind, RanksMetas) and self.kind.ranks(self.config)

    def priorities(self, names: list[str] | None) -> dict[str, int]:
        if not self.ranks:
            return {}
        self._refresh()
        with self._lock:
            return self._ranked_now(names)

    def _ranked_now(self, names: list[str] | None) -> dict[str, int]:
        """`priorities` of the current version (the caller holds `_lock`)."""
        all_names, metas = self._names, self._metas
        priority = self.kind.priority
        out = {}
        if names is None:
            for index in range(len(metas)):
                found = priority(metas[index])
                if found:
                    out[all_names[index]] = found
            return out
        for name in names:
            index = all_names.index(name)
            found = None if index is None or not len(metas) else priority(metas[index])
            if found:
                out[name] = found
        return out

    def get(self, name: str) -> dict[str, Any] | None:
        self._refresh()
        with self._lock:
            names, metas = self._names, self._metas
        index = names.index(name)
        if index is None:
            return None
        meta = metas[index] if len(metas) else None
        return self.kind.describe(self.config, name, meta)

    def __len__(self) -> int:
        return len(self._names)

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
            names = self._names.slice(0, len(self._names))
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
                self._added = (self._version, self._names.added_lines())
            lines = self._added[1]
        return lines, q

    def _watch_from_now(self, q: queue.SimpleQueue) -> None:
        """`q` gets every change after the current version (kept as a set to diff against),
        told by the follower thread, started with the first watch. The caller holds `_lock`."""
        self._watchers[q] = self._version
        if self._version not in self._sets:
            self._sets[self._version] = self._names.as_set()
            self._note_ranks(self._version)
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
        last saw (see the module docstring)."""
        while not self._stop.wait(FOLLOW_SECONDS):
            self._refresh()
            with self._lock:
                current = self._version
                behind = {v for v in self._watchers.values() if v < current}
                if behind:  # the names as a set only when some watcher needs a diff
                    names = self._sets.get(current) or self._names.as_set()
                    if current not in self._sets:
                        self._sets[current] = names
                        self._note_ranks(current)
                    for since in behind:
                        before = self._sets[since]
                        events = [_event("DELETED", n) for n in sorted(before - names)]
                        came = names - before
                        if self._ranks:  # a new priority: the item is ADDED again
                            came |= {
                                n for n in reranked(self._ranks[since], self._ranks[current])
                                if n in names and n in before
                            }  # fmt: skip
                        events += [_event("ADDED", n) for n in sorted(came)]
                        for q, seen in list(self._watchers.items()):
                            if seen == since:
                                for event in events:
                                    q.put(event)
                                self._watchers[q] = current
                    self._sets[current] = names
                wanted = set(self._watchers.values())
                self._sets = {v: s for v, s in self._sets.items() if v in wanted}
                self._ranks = {v: r for v, r in self._ranks.items() if v in wanted}

    def _note_ranks(self, version: int) -> None:
        """The priorities of `version` (the current one), kept beside its set of names while
        watchers need it - for a source that ranks its items only. The caller holds `_lock`."""
        if self.ranks:
            ranked = self._ranked_now(None)
            self._ranks[version] = {name.encode(): p for name, p in ranked.items()}


if (
    __name__ == "__main__"
):  # the publisher: python -m kube_workqueue.ambassador.publication FOLDER < CONFIG (JSON)
    import json
    import signal
    import sys

    large_blocks_go_back()
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    signal.signal(signal.SIGINT, lambda *_: stopping.set())
    config = json.loads(sys.stdin.buffer.read())  # (never an argument: it may hold a password)
    run_publisher(config, sys.argv[1], stopping)
