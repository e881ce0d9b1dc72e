"""A gunicorn worker's source: the newest listing the publisher wrote (`publication.py`, whose
docstring has the files and the invariants), read as a base and a delta, with the Source
interface of `sources/base.py`.

Reading: `current` is looked at once a request (one stat, a page of items' data too: `reader`).
When it names a newer version the worker reads that version's delta over the base it holds, or,
for another base, that base whole (read ahead by a thread once `current` named it as coming),
then the changes files since. A version's listing never changes once read, so a request takes
the current one and reads it without the lock.

Watches: a follower thread (every `FOLLOW_SECONDS`, started with the first watch) hands each
watcher the events from the version it last saw to the newest - the publisher's events files,
chained back to that version, or, where a link is missing, the difference of the two listings
it keeps for the versions watchers are at (listings over one base share it).

Readiness: the publisher's heartbeat, read at most every `READY_SECONDS`; one older than
`STALE_SECONDS` means the publisher is gone.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from .publication import (
    CHANGES,
    COMING,
    CURRENT,
    DELTA,
    FOLLOW_SECONDS,
    HEARTBEAT,
    READY_SECONDS,
    STALE_SECONDS,
    BesideHeartbeat,
)
from .sorted_names import SortedNames
from .sources.base import RanksMetas
from .sources.listed import reranked
from .sources.packed_listing import PackedListing
from .sources.registry import kind_of, source_type
from .timed_queue import TimedQueue


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
        # a base `current` names as coming, read ahead by a thread: [file, thread, listing or
        # None until read]; the thread sets only the listing
        self._ahead: list | None = None
        self._watchers: dict[TimedQueue, int] = {}  # queue -> version it has seen
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
                version_text, base_file, *more = f.read().split()
            whole = [int(w.removeprefix(DELTA)) for w in more if w.startswith(DELTA)]
            coming = [w.removeprefix(COMING) for w in more if w.startswith(COMING)]
            if coming:
                self._read_ahead(coming[0])
            version = int(version_text)
            if version <= self._version:
                self._stamp = stamp
                return
            try:
                listing = self._read(version, base_file, whole[0] if whole else None)
            except (FileNotFoundError, ValueError):
                return  # superseded while we looked, or torn: the next look reads it again
            if listing is None:
                return
            self._listing, self._base_file = listing, base_file
            self._version, self._stamp = version, stamp

    def _read(self, version: int, base_file: str, whole: int | None) -> PackedListing | None:
        """Version `version`: the listing held with the changes files since it, when it is
        over `base_file` and not older than the whole delta `whole`; else that base with that
        delta and the changes since (None: a link of their chain is not there). The caller
        holds `_lock`."""
        held = self._listing if base_file == self._base_file else None
        if whole is None:  # a folder's names, whole
            return held if held is not None else self._base(base_file)
        chain = None
        if held is not None and self._version >= whole:
            chain = self._changes(self._version, version)
        if chain is None:  # (a base's names only are read by `over`: the held one will do)
            base = held if held is not None else self._base(base_file)
            with open(os.path.join(self.folder, f"{DELTA}{whole:012d}"), "rb") as f:
                held = base.over(f.read())
            chain = self._changes(whole, version)
            if chain is None:
                return None
        for changes in chain:
            held = held.changed_by(changes)
        return held

    def _changes(self, since: int, version: int) -> list[bytes] | None:
        """The changes files that take version `since` to `version`, in order - each names the
        version before it: a chain back to `since` - or None where a link is not there."""
        chain: list[bytes] = []
        while version > since:
            try:
                with open(os.path.join(self.folder, f"{CHANGES}{version:012d}"), "rb") as f:
                    before, changes = f.read().split(b"\n", 1)
            except (FileNotFoundError, ValueError):
                return None
            chain.append(changes)
            version = int(before)
        return chain[::-1] if version == since else None

    def _read_ahead(self, file_name: str) -> None:
        """Read the base `file_name` in a thread of its own (the publisher names it as coming
        before its versions use it), unless it is held or being read. The caller holds
        `_lock`."""
        if file_name == self._base_file or (self._ahead and self._ahead[0] == file_name):
            return
        ahead: list = [file_name, None, None]

        def read() -> None:
            try:
                ahead[2] = self._read_base(file_name)  # (offsets: when first asked)
            except (FileNotFoundError, UnicodeDecodeError):
                pass  # superseded, or not whole: `_base` reads it again, or finds the newer one

        ahead[1] = threading.Thread(target=read, name="ambassador-read-ahead", daemon=True)
        self._ahead = ahead
        ahead[1].start()

    def _base(self, file_name: str) -> PackedListing:
        """The base published in `file_name`: read ahead (waiting for the thread reading it),
        or read now."""
        ahead = self._ahead
        if ahead is not None and ahead[0] == file_name:
            ahead[1].join()
            self._ahead = None
            if ahead[2] is not None:
                return ahead[2]
        return self._read_base(file_name)

    def _read_base(self, file_name: str) -> PackedListing:
        """The base published in `file_name` (and its metas, where the source has them)."""
        with open(os.path.join(self.folder, file_name), "rb") as f:
            raw = f.read()
        raw.decode("utf-8")  # the publisher writes UTF-8: anything else is a torn file
        metas = b""  # (none: a source whose items are described afresh, a folder)
        path = os.path.join(self.folder, "meta-" + file_name.removeprefix("names-"))
        with contextlib.suppress(FileNotFoundError), open(path, "rb") as f:
            metas = f.read()
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
        return self.reader()(name)

    def reader(self) -> Callable[[str], dict[str, Any] | None]:
        """`get` over the version current now: a page of names, one look (`ReadsPages`)."""
        meta_of, describe = self._current()[0].metas_in_order(), self.kind.describe
        return lambda name: (None if (meta := meta_of(name)) is None
                             else describe(self.config, name, meta or None))  # fmt: skip

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
        """A log source's backlog as the publisher last wrote it (`publication.BesideHeartbeat`):
        (records read and not yet served, the oldest one's age in seconds); None for any
        other source."""
        return BesideHeartbeat(self.folder).backlog()

    def log_facts(self) -> dict | None:
        """A log source's identity as the publisher last wrote it, or None."""
        return BesideHeartbeat(self.folder).log_facts()

    def subscribe(self) -> tuple[list[str], TimedQueue]:
        """Every current name, and a queue of each later event. The caller's duty:
        `unsubscribe(q)`."""
        self._refresh()
        q: TimedQueue = TimedQueue()
        with self._lock:
            self._watch_from_now(q)
            names = self._listing.page(None, None)[0]
        return names, q

    def subscribe_events(self) -> TimedQueue:
        """A queue of each change after the current version (a watch pages the names
        itself). The caller's duty: `unsubscribe(q)`."""
        self._refresh()
        q: TimedQueue = TimedQueue()
        with self._lock:
            self._watch_from_now(q)
        return q

    def subscribe_lines(self) -> tuple[bytes, TimedQueue]:
        """As `subscribe`, with the current names already as the stream's ADDED lines: built
        once a version and shared by every watch (3,000 watches each joining 10,000 lines of
        their own cost 25 ms of the interpreter apiece, and memory they never gave back). The
        caller's duty: `unsubscribe(q)`."""
        self._refresh()
        q: TimedQueue = TimedQueue()
        with self._lock:
            self._watch_from_now(q)
            if self._added is None or self._added[0] != self._version:
                self._added = (self._version, self._listing.names.added_lines())
            lines = self._added[1]
        return lines, q

    def _watch_from_now(self, q: TimedQueue) -> None:
        """`q` gets every change after the current version, told by the follower thread,
        started with the first watch. The caller holds `_lock`."""
        self._watchers[q] = self._version
        self._seen.setdefault(self._version, self._listing)
        if self._follower is None:
            self._follower = threading.Thread(
                target=self._follow, name="ambassador-follow", daemon=True
            )
            self._follower.start()

    def unsubscribe(self, q: TimedQueue) -> None:
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
