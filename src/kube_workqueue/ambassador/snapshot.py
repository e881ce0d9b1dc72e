"""The ambassador's in-memory view of the items: sorted names, settling files, change events.

Requests never scan the folder; they read this snapshot, which the source keeps current from
file-system events or polling. Three pieces of state, all guarded by `_lock`:

  listed   the name of every item served (a set: its size and mtime are not kept - a request
           stats the file itself); `names` is the same set, sorted, so a page after any name
           is a bisect and a slice.
  pending  name -> (size, mtime_ns, since) of candidate files that have not yet held still for
           `settle` seconds; `since` is when their current size and mtime were first seen.
  version  bumped on every change to `listed`, so readers can cache what they derive from it.

Settling: a file is listed once its size and mtime have been unchanged for `settle` seconds.
During the first scan `since` is the file's own mtime (capped at now), so files already at rest
when the ambassador starts are listed at once; afterwards it is the moment a change was seen.
A listed file stays listed until it disappears.

Watchers subscribe to get every current name as ADDED, then each ADDED/DELETED as it happens,
with nothing missed between the two (both happen under the lock).

Writers (the source's scan, its file events, its refresher: several threads) take `_writing`
first, one at a time; readers take only `_lock`. So a large change - forgetting half a million
names - is computed under `_writing` alone, as a new sorted list built in one O(n) pass, and
swapped in under `_lock` in O(k): lists and pages wait for the swap, never for the work. A few
names (at most `_BULK`) are deleted in place, a bisect and a memmove each.
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_left, bisect_right, insort
from collections.abc import Callable, Iterable

from .timed_queue import TimedQueue

Event = dict  # {"type": "ADDED" | "DELETED", "item": name}

# Past this many names added or removed at once, one pass over the list beats one by one.
_BULK = 64


class Snapshot:
    def __init__(self, settle: float, clock: Callable[[], float] = time.time) -> None:
        if settle < 0:
            raise ValueError("settle must be >= 0 seconds")
        self.settle = settle
        self.clock = clock
        self._lock = threading.Lock()  # readers and writers: held briefly
        self._writing = threading.Lock()  # writers only, before `_lock` (module docstring)
        self._listed: set[str] = set()
        self._names: list[str] = []  # invariant: sorted(self._listed)
        self._pending: dict[str, tuple[int, int, float]] = {}
        # Files a first scan found at rest, to be listed by the next promote_settled() in one
        # sorted insert (a million of them, handed over in chunks, sorted once).
        self._at_rest: dict[str, None] = {}  # an ordered set
        self.version = 0
        self._subscribers: set[TimedQueue] = set()

    # -- written by the source -------------------------------------------------------------

    def observe(self, name: str, size: int, mtime_ns: int, *, initial: bool = False) -> None:
        """The source saw candidate file `name` with this size and mtime."""
        self.observe_many([(name, size, mtime_ns)], initial=initial)

    def observe_many(self, seen: Iterable[tuple[str, int, int]], *, initial: bool = False) -> None:
        """`observe` for many files at once - (name, size, mtime_ns) each - under one lock
        (a directory's scan: a million files at start-up)."""
        at_rest = []  # found already settled by a first scan: never pending
        with self._writing, self._lock:
            listed, pending = self._listed, self._pending  # (forget may have swapped them)
            now = self.clock()
            for name, size, mtime_ns in seen:
                if name in listed:
                    continue
                current = pending.get(name)
                if current is not None and current[0] == size and current[1] == mtime_ns:
                    continue
                since = min(mtime_ns / 1e9, now) if initial else now
                if initial and current is None and since + self.settle <= now:
                    at_rest.append(name)
                else:
                    pending[name] = (size, mtime_ns, since)
            self._at_rest.update(dict.fromkeys(at_rest))  # listed by promote_settled()

    def forget(self, names: Iterable[str]) -> None:
        """These files are gone (or are no longer items). O(k log n) for a few, one O(n) pass
        outside the readers' lock for many (module docstring)."""
        gone = set(names)
        if not gone:
            return
        with self._writing:  # what writers change holds still: read it without `_lock`
            listed, pending, at_rest = self._listed, self._pending, self._at_rest
            leaving = gone & listed
            settling = [n for n in gone if n in pending or n in at_rest] if pending or at_rest \
                else []  # fmt: skip
            names_kept = listed_kept = None
            if len(leaving) > _BULK:  # built while readers go on reading the current ones
                names_kept = [name for name in self._names if name not in leaving]
                listed_kept = listed - leaving
            with self._lock:
                for name in settling:
                    pending.pop(name, None)
                    at_rest.pop(name, None)
                if not leaving:
                    return
                if names_kept is not None:
                    self._names, self._listed = names_kept, listed_kept
                else:
                    listed.difference_update(leaving)
                    for name in leaving:
                        del self._names[bisect_left(self._names, name)]
                self.version += 1
                if self._subscribers:
                    for name in sorted(leaving):
                        self._publish({"type": "DELETED", "item": name})

    def promote_settled(self) -> float | None:
        """List every pending file that has held still long enough. Returns the time the next
        pending file is due, or None when nothing is pending."""
        with self._writing, self._lock:
            now = self.clock()
            ready, next_due = list(self._at_rest), None
            self._at_rest = {}
            for name, (_, _, since) in self._pending.items():
                due = since + self.settle
                if due <= now:
                    ready.append(name)
                elif next_due is None or due < next_due:
                    next_due = due
            if ready:
                for name in ready:
                    self._pending.pop(name, None)
                self._list_now(list(dict.fromkeys(ready)))
            return next_due

    def _list_now(self, ready: list[str]) -> None:
        """List `ready` (names not listed yet) as one new version. The caller holds the lock."""
        self._listed.update(ready)
        ready.sort()
        if len(ready) > _BULK:
            self._names.extend(ready)
            self._names.sort()  # two sorted runs: Python's sort merges them in one pass
        else:
            for name in ready:
                insort(self._names, name)
        self.version += 1
        if self._subscribers:
            for name in ready:
                self._publish({"type": "ADDED", "item": name})

    def all_names(self) -> list[str]:
        """Every name the snapshot holds: listed, settling, or found at rest (a copy)."""
        with self._lock:
            return [*self._names, *self._pending, *self._at_rest]

    def pending_names(self) -> list[str]:
        with self._lock:
            return [*self._pending, *self._at_rest]

    # -- read by requests ------------------------------------------------------------------

    def __contains__(self, name: object) -> bool:
        return name in self._listed  # a dict lookup is atomic under the GIL

    def __len__(self) -> int:
        return len(self._names)

    def page(self, after: str | None, limit: int | None) -> tuple[list[str], int, int]:
        """Names strictly after `after` (all when None), at most `limit` of them, with how many
        remain past the page and the snapshot version they come from."""
        with self._lock:
            start = 0 if after is None else bisect_right(self._names, after)
            end = len(self._names) if limit is None else min(len(self._names), start + limit)
            return self._names[start:end], len(self._names) - end, self.version

    # -- watchers --------------------------------------------------------------------------

    def subscribe(self) -> tuple[list[str], TimedQueue]:
        """Every current name, and a queue that receives each later event. The caller's duty:
        `unsubscribe(q)` when done, or the queue keeps growing."""
        q: TimedQueue = TimedQueue()
        with self._lock:
            self._subscribers.add(q)
            return list(self._names), q

    def subscribe_events(self) -> TimedQueue:
        """A queue that receives each event from now on (a watch pages the names itself).
        The caller's duty: `unsubscribe(q)`."""
        q: TimedQueue = TimedQueue()
        with self._lock:
            self._subscribers.add(q)
        return q

    def unsubscribe(self, q: TimedQueue) -> None:
        with self._lock:
            self._subscribers.discard(q)

    def _publish(self, event: Event) -> None:
        for q in self._subscribers:
            q.put(event)
