"""A source whose items are found by listing a remote store: an object store's keys, a Redis set.

The remote store is read through a `Lister` (listers.py; s3.py, redis_set.py): `list_all()`
gives every item's name with its *meta* - a short string the lister makes from what the listing
says of the item (an object's ETag, size and time; a member's data) and later turns back into
the item's data (`describe`). Nothing else is kept per item, and a request reads only memory:
listing a bucket, fetching an item or watching costs no request to the store.

Finding changes:
  * polling: a full listing every `poll_interval`, compared with the current one (one LIST
    page per thousand objects; nothing per object);
  * events, where the lister has them (`changes`: S3 notifications through SQS, Redis keyspace
    notifications): each batch of changed names is applied as it comes, and the full listing
    runs only every `relist_interval`, as the safety net for a lost notification.

State, written by the refresher thread (or `start`) one writer at a time (`_writing`), read by
requests:
  _listing   the names, sorted, and each one's meta (packed_listing.py: two blobs, about the
             bytes themselves and 8 more an item, and a small delta of recent changes over
             them) - replaced whole by each change, never changed in place, so a reader takes
             the current one and needs no lock; a thread of its own (`_tidy`, one at a time)
             folds a grown delta into new blobs and swaps in the same items over them, under
             the same version;
  version    grows by one with every listing that differs (a name came or went, a meta
             changed): an object overwritten in place is a new version;
  watchers   queues told each name ADDED or DELETED, under `_lock`, at the swap (an item whose
             priority changed, where the lister ranks items, is ADDED again).
A listing that fails leaves the listing as it was - an outage never reads as "every item was
removed" - and makes `ready()` False (`problem` says why) until a listing succeeds again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from ..sorted_names import names_diff
from ..timed_queue import TimedQueue
from .base import RanksMetas
from .listers import (
    RELIST,
    RESTART,
    Change,
    HoldsBacklog,
    HoldsConnection,
    Lister,
    Resumes,
    SourceUnreachable,
    TellsLog,
    intervals,
)
from .packed_listing import PackedListing

log = logging.getLogger(__name__)


class ListedSource:
    @classmethod
    def configured(cls, lister: Lister, config: Mapping[str, Any], poll: float) -> ListedSource:
        """A source over `lister` at the intervals of its app configuration (`intervals`)."""
        every = intervals(config, poll)
        return cls(lister, poll_interval=every["POLL_INTERVAL"],
                   relist_interval=every["RELIST_INTERVAL"])  # fmt: skip

    def __init__(
        self,
        lister: Lister,
        *,
        poll_interval: float = 10.0,
        relist_interval: float = 300.0,
    ) -> None:
        self.lister = lister
        self.poll_interval = poll_interval
        self.relist_interval = relist_interval
        self._listing = PackedListing()
        self._version = 0
        self._watchers: set[TimedQueue] = set()
        self._writing = threading.Lock()  # one writer at a time: the lister's two threads
        self._lock = threading.Lock()  # the swap and the watchers: held briefly
        # Invariant (under _writing): while a full listing runs, the names `apply` changed
        # since it began (an ordered set); None between listings. One listing at a time.
        self._touched: dict[str, None] | None = None
        self._tidying = False  # (under _writing) a thread merges or prepares the listing
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.problem: str | None = None  # why the last listing failed; None when it worked
        self.mode = "not started"
        self.listings = 0  # full listings done (the benchmark and tests read it)

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        """The first full listing (raises SourceUnreachable), then the refresher."""
        self._relist()
        events = self.lister.changes(self._stop)
        if events is not None:
            self.mode = "events"
            self._spawn(lambda: self._follow(events), "ambassador-events")
            self._spawn(lambda: self._poll(self.relist_interval), "ambassador-relist")
        else:
            self.mode = "polling"
            self._spawn(lambda: self._poll(self.poll_interval), "ambassador-poll")

    def _spawn(self, target: Callable[[], None], name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def stop(self, wait: bool = True) -> None:
        self._stop.set()
        if wait:
            for thread in self._threads:
                if thread is not threading.current_thread():
                    thread.join(timeout=5)
        if isinstance(self.lister, HoldsConnection):
            self.lister.stop()

    # -- refreshing ------------------------------------------------------------------------

    def _poll(self, every: float) -> None:
        while not self._stop.wait(every):
            try:
                self._relist()
            except Exception as exc:  # never the thread's end (`_failed`)
                self._failed(exc)

    def _follow(self, events: Iterator) -> None:
        """Apply the feed's batches. A feed that breaks hands over to polling - for good, or,
        where the lister `resumes` (a log: its feed starts again from the newest position
        read), until a listing works again, then to a new feed."""
        while True:
            try:
                for batch in events:
                    if batch is RESTART:  # another store now (a log made again): listed
                        break  # afresh below, then followed by a new feed
                    if batch is RELIST:
                        try:
                            self._relist()
                        except Exception as exc:  # the feed goes on; so does the poller
                            self._failed(exc)
                    else:
                        self.apply(batch)
                else:
                    return
                events = self._restarted()
                if events is None:
                    return
                continue
            except Exception as exc:  # the feed broke: polling carries on
                self._failed(exc)
                self.mode = "polling"
            if not (isinstance(self.lister, Resumes) and self.lister.resumes):
                return self._poll(self.poll_interval)
            events = self._resumed()
            if events is None:
                return

    def _restarted(self) -> Iterator | None:
        """After a feed's RESTART: a listing of the store as it is now, then a new feed (None:
        stopped). A listing that fails is polled again, as after an outage."""
        try:
            self._relist()
            return self.lister.changes(self._stop)
        except Exception as exc:
            self._failed(exc)
            self.mode = "polling"
        return self._resumed()

    def _resumed(self) -> Iterator | None:
        """Poll until a listing works, then a new feed (None: stopped)."""
        while not self._stop.wait(self.poll_interval):
            try:
                self._relist()
                events = self.lister.changes(self._stop)
            except Exception as exc:
                self._failed(exc)
                continue
            self.mode = "events"
            return events
        return None

    def log_facts(self) -> dict | None:
        """What identifies the log a log's lister reads, and when it last started over
        (`log_lives.Lives.facts`: a listing's `metadata.log`); None for any other source."""
        return self.lister.log_facts() if isinstance(self.lister, TellsLog) else None

    def backlog(self) -> tuple[int, float] | None:
        """(records read from a log and not yet served, the oldest one's age in seconds), for
        a log's lister (`log_records.Backlog`); None for any other source."""
        if not isinstance(self.lister, HoldsBacklog):
            return None
        return self.lister.backlog.figures(time.time())

    def _failed(self, exc: Exception) -> None:
        """A listing (or the feed) failed: the items stay as last listed, /readyz says why, and
        the next listing may clear it - an unreachable source said as such, anything else (a
        bug, an answer nobody foresaw) with its traceback, once."""
        if self.problem is None:
            if isinstance(exc, SourceUnreachable):
                log.warning("%s cannot be listed: %s (the items stay as last listed)",
                            self.lister.where, exc)  # fmt: skip
            else:
                log.error("%s: the listing failed unexpectedly (the items stay as last listed; "
                          "trying again)", self.lister.where, exc_info=exc)  # fmt: skip
        if isinstance(exc, SourceUnreachable):
            self.problem = str(exc) or type(exc).__name__
        else:
            self.problem = f"the listing failed: {type(exc).__name__}: {exc}"

    def _relist(self) -> None:
        """A full listing, compared with the current one. A change a notification applied
        while the listing ran is newer than the listing's view of that name: it stands."""
        with self._writing:
            self._touched = {}  # names `apply` changes from now on
        try:
            fresh = PackedListing.build(self._listed())  # raises before anything changes
        except BaseException:
            with self._writing:
                self._touched = None
            raise
        with self._writing:  # (one hold from here: an `apply` now comes after the swap)
            touched, self._touched = self._touched, None
            if touched:  # the notification's account is the newer one
                current = self._listing
                fresh = fresh.with_changes({name: current.meta(name) for name in touched})[0]
            self._install(fresh)
            self.listings += 1
            if self._listing is fresh:  # a new base: its offsets found off the change path
                self._tidy(fresh)
        if self.problem is not None:
            log.warning("%s can be listed again", self.lister.where)
        self.problem = None

    def _listed(self) -> Iterable[tuple[str, str]]:
        listed = self.lister.list_all()
        return listed.items() if isinstance(listed, dict) else listed

    def apply(self, batch: list[Change]) -> None:
        """Changes one at a time, as a notification reports them: (name, meta) is there now
        with this meta, (name, None) is gone. The same change twice changes nothing."""
        changes = dict(batch)  # the last word on a name is the one that stands
        with self._writing:
            if self._touched is not None:
                self._touched.update(dict.fromkeys(changes))
            fresh, added, removed = self._listing.with_changes(changes)
            self._install(fresh, (added, removed), list(changes))
            if fresh.wants_merge():
                self._tidy(fresh)

    def _tidy(self, listing: PackedListing) -> None:
        """Fold `listing`'s delta into a new base - or, for a new base, find where its names
        begin - in a thread of its own, so a batch of changes never waits for a copy of the
        whole listing (packed_listing.py). One at a time; the caller holds `_writing`."""
        if self._tidying:
            return
        self._tidying = True
        threading.Thread(target=self._tidied, args=(listing,), name="ambassador-tidy",
                         daemon=True).start()  # fmt: skip

    def _tidied(self, listing: PackedListing) -> None:
        try:
            merged = listing.merged().prepared()  # the copy and the offsets, outside the lock
            if merged is listing:  # a base alone: its offsets were all it needed
                return
            with self._writing:
                current = self._listing
                if current.shares_base(listing):  # else a full listing replaced it meanwhile
                    rebased = current.rebased(listing, merged)
                    with self._lock:  # the same items under the same version
                        self._listing = rebased
        finally:
            with self._writing:
                self._tidying = False
                if self._listing.wants_merge():  # changes that came during this one
                    self._tidy(self._listing)

    def _install(self, fresh: PackedListing, came_went: tuple[list, list] | None = None,
                 changed: list[str] | None = None) -> None:  # fmt: skip
        """Make `fresh` the listing, telling the watchers what came and went (`came_went` when
        the caller knows it, else found by comparing) - and, where the lister ranks items,
        what was re-ranked: among `changed` only when the caller knows what changed (a change
        feed's batch: its cost is the batch's, not the listing's - a stream's feed at 1,000
        records a second beside 60,000 items spent its time ranking every item again). The
        caller holds `_writing` (so no watcher arrives between the comparison and the swap)."""
        current = self._listing
        if fresh.same_as(current):
            return
        added: list[str] = []
        removed: list[str] = []
        if came_went is not None:
            added, removed = came_went
        elif self._watchers and fresh.names.blob != current.names.blob:
            added, removed = names_diff(current.names, fresh.names)
        if self._watchers and self.ranks:  # a new priority: the item is ADDED again
            moved = reranked(self._ranked(current, changed), self._ranked(fresh, changed))
            added = sorted({*added, *(name for name in moved if name in fresh)})
        with self._lock:
            self._listing = fresh
            self._version += 1
            for q in self._watchers:
                for name in removed:
                    q.put({"type": "DELETED", "item": name})
                for name in added:
                    q.put({"type": "ADDED", "item": name})

    # -- the Source interface (base.py) ----------------------------------------------------

    def page(self, after: str | None, limit: int | None) -> tuple[list[str], int, int]:
        with self._lock:
            listing, version = self._listing, self._version
        names, remaining = listing.page(after, limit)
        return names, remaining, version

    def published(self, told: TimedQueue) -> tuple[int, PackedListing, list[dict]]:
        """The version and its listing, as the publisher writes it (publication.py): a base,
        written once, and a small delta over it, written each version - and every event `told`
        (a queue of ours, `subscribe_events`) holds, which are those up to this version and no
        later: watchers are told at the swap, under the same lock."""
        with self._lock:
            events = []
            while not told.empty():
                events.append(told.get_nowait())
            return self._version, self._listing, events

    def get(self, name: str) -> dict[str, Any] | None:
        meta = self._listing.meta(name)
        return None if meta is None else self.lister.describe(name, meta)

    @property
    def ranks(self) -> bool:
        """`base.Ranks`: whether the lister reads priorities from metas (a sorted set, a data
        hash)."""
        return isinstance(self.lister, RanksMetas) and self.lister.ranks(self.lister.config)

    def priorities(self, names: list[str] | None) -> dict[str, int]:
        return self._ranked(self._listing, names) if self.ranks else {}

    def _ranked(self, listing: PackedListing, names: list[str] | None = None) -> dict[str, int]:
        """The priorities (not 0) of `names` (None: every item) in `listing`."""
        if names is None:
            names = listing.page(None, None)[0]
        priority = self.lister.priority
        out = {}
        for name in names:
            meta = listing.meta(name)
            found = None if meta is None else priority(meta)
            if found:
                out[name] = found
        return out

    def subscribe(self) -> tuple[list[str], TimedQueue]:
        """Every current name, and a queue of each later event. The caller's duty:
        `unsubscribe(q)`."""
        q: TimedQueue = TimedQueue()
        with self._writing, self._lock:  # no swap between the names and the first event
            self._watchers.add(q)
            listing = self._listing
        return listing.page(None, None)[0], q

    def subscribe_events(self) -> TimedQueue:
        """A queue of each event from now on (a watch pages the names itself). The caller's
        duty: `unsubscribe(q)`."""
        q: TimedQueue = TimedQueue()
        with self._lock:
            self._watchers.add(q)
        return q

    def unsubscribe(self, q) -> None:
        with self._lock:
            self._watchers.discard(q)

    def ready(self) -> bool:
        return self.problem is None and self.listings > 0

    def __len__(self) -> int:
        return len(self._listing)

    def settling(self) -> int:
        """None ever: a store's writes are atomic, so an item is listed as it appears."""
        return 0

    def __contains__(self, name: object) -> bool:
        return name in self._listing

    @property
    def version(self) -> int:
        return self._version


def reranked(before: dict[str, int], after: dict[str, int]) -> set[str]:
    """The names in both rankings' listings whose priority changed (a name missing from one
    is at 0 there; names that came or went are the caller's to tell apart)."""
    return {name for name in before.keys() | after.keys() if before.get(name) != after.get(name)}
