"""A source whose items are found by listing a remote store: an object store's keys, a Redis set.

The remote store is read through a `Lister` (s3.py, redis_set.py): `list_all()` gives every
item's name with its *meta* - a short string the lister makes from what the listing says of the
item (an object's ETag, size and time; a member's data) and later turns back into the item's
data (`describe`). Nothing else is kept per item, and a request reads only memory: listing a
bucket, fetching an item or watching costs no request to the store.

Finding changes:
  * polling: a full listing every `poll_interval`, diffed against the snapshot (one LIST page per
    thousand objects; nothing per object);
  * events, where the lister has them (`changes`: S3 notifications through SQS, Redis keyspace
    notifications): each batch of changed names is applied as it comes, and the full listing
    runs only every `relist_interval`, as the safety net for a lost notification.

State, all written by the refresher thread (or `start`) and read by requests:
  snapshot   the names (ambassador.snapshot.Snapshot, no settling: a store's writes are atomic),
             with its version and the watchers' events;
  _meta      name -> meta, for every listed name (and only those);
  version    the snapshot's version plus the number of meta changes - both only grow, so the
             sum does: an object overwritten in place (same name, new ETag) is a new version.
A listing that fails leaves the snapshot as it was - an outage never reads as "every item was
removed" - and makes `ready()` False (`problem` says why) until a listing succeeds again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol

from ..snapshot import Snapshot

log = logging.getLogger(__name__)

Change = tuple[str, "str | None"]  # (name, meta) - meta None: the item is gone
RELIST = object()  # what a change feed yields for "something changed: list everything again"


class SourceUnreachable(Exception):
    """The store could not be listed right now (network, credentials, throttling)."""


class Lister(Protocol):
    where: str  # "s3://bucket/prefix/", for logs

    def list_all(self) -> dict[str, str] | Iterable[tuple[str, str]]:
        """Every item's name -> meta (a dict, or (name, meta) pairs); raises
        SourceUnreachable. The whole listing or an exception: never a part of it."""

    def describe(self, name: str, meta: str) -> dict[str, Any]:
        """The item's data from its meta."""

    def changes(self, stop: threading.Event) -> Iterator[list[Change] | object] | None:
        """Batches of changes as the store reports them (or RELIST when it says only that
        something changed), until `stop`; None when the store reports none (then it polls)."""


class ListedSource:
    def __init__(
        self,
        lister: Lister,
        *,
        poll_interval: float = 10.0,
        relist_interval: float = 300.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.lister = lister
        self.poll_interval = poll_interval
        self.relist_interval = relist_interval
        self.snapshot = Snapshot(0.0, clock)
        self._meta: dict[str, str] = {}
        self._meta_changes = 0
        self._apply_lock = threading.Lock()  # one writer at a time: the lister's two threads
        # Invariant (under _apply_lock): while a full listing runs, the names `apply` changed
        # since it began (an ordered set); None between listings. One listing at a time.
        self._touched: dict[str, None] | None = None
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.problem: str | None = None  # why the last listing failed; None when it worked
        self.mode = "not started"
        self.listings = 0  # full listings done (the benchmark and tests read it)

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        """The first full listing (raises SourceUnreachable), then the refresher."""
        self._relist(initial=True)
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

    # -- refreshing ------------------------------------------------------------------------

    def _poll(self, every: float) -> None:
        while not self._stop.wait(every):
            try:
                self._relist()
            except SourceUnreachable as exc:
                self._unreachable(exc)

    def _follow(self, events: Iterator) -> None:
        try:
            for batch in events:
                if batch is RELIST:
                    try:
                        self._relist()
                    except SourceUnreachable as exc:  # the feed goes on; so does the poller
                        self._unreachable(exc)
                else:
                    self.apply(batch)
        except SourceUnreachable as exc:  # the feed broke: polling carries on alone
            self._unreachable(exc)
            self.mode = "polling"
            self._poll(self.poll_interval)

    def _unreachable(self, exc: Exception) -> None:
        if self.problem is None:
            log.warning("%s cannot be listed: %s (the items stay as last listed)",
                        self.lister.where, exc)  # fmt: skip
        self.problem = str(exc) or type(exc).__name__

    def _relist(self, *, initial: bool = False) -> None:
        """A full listing, diffed against the snapshot. A change a notification applied while
        the listing ran is newer than the listing's view of that name: it stands."""
        with self._apply_lock:
            self._touched = {}  # names `apply` changes from now on
        listed = self.lister.list_all()  # raises before anything changes here
        if not isinstance(listed, dict):
            listed = dict(listed)
        with self._apply_lock:
            touched, self._touched = self._touched, None
            for name in touched:  # the notification's account is the newer one
                if name in self._meta:
                    listed[name] = self._meta[name]
                else:
                    listed.pop(name, None)
            meta = self._meta  # updated in place: a known name keeps its one string object
            if not meta:  # the first listing: adopted as it is, no copy
                self._meta = meta = listed
                gone, new = [], list(listed)
            else:
                gone = [n for n in meta if n not in listed]
                new = []
                for name, value in listed.items():
                    before = meta.get(name)
                    if before is None:
                        new.append(name)
                    elif before != value:
                        self._meta_changes += 1
                    else:
                        continue
                    meta[name] = value
                for name in gone:
                    del meta[name]
            if gone:
                self.snapshot.forget(gone)
            if new:  # (name, size, mtime) made one at a time: no list of tuples for a million
                self.snapshot.observe_many(((n, 0, 0) for n in new), initial=initial)
                self.snapshot.promote_settled()
            self.listings += 1
        if self.problem is not None:
            log.warning("%s can be listed again", self.lister.where)
        self.problem = None

    def apply(self, batch: list[Change]) -> None:
        """Changes one at a time, as a notification reports them: (name, meta) is there now
        with this meta, (name, None) is gone. The same change twice changes nothing."""
        with self._apply_lock:
            gone, new = [], []
            for name, meta in batch:
                if self._touched is not None:
                    self._touched[name] = None
                before = self._meta.get(name)
                if meta is None:
                    if before is not None:
                        del self._meta[name]
                        gone.append(name)
                elif before is None:
                    self._meta[name] = meta
                    new.append((name, 0, 0))
                elif before != meta:
                    self._meta[name] = meta
                    self._meta_changes += 1
            if gone:
                self.snapshot.forget(gone)
            if new:
                self.snapshot.observe_many(new)
                self.snapshot.promote_settled()

    # -- the Source interface (base.py) ----------------------------------------------------

    def page(self, after: str | None, limit: int | None) -> tuple[list[str], int, int]:
        names, remaining, _ = self.snapshot.page(after, limit)
        return names, remaining, self.version

    def metas(self, names: list[str]) -> list[str]:
        """The meta of each of `names` (as `page` gave them; "" for one gone since)."""
        meta = self._meta
        return [meta.get(n, "") for n in names]

    def get(self, name: str) -> dict[str, Any] | None:
        meta = self._meta.get(name)
        if meta is None or name not in self.snapshot:
            return None
        return self.lister.describe(name, meta)

    def subscribe(self):
        return self.snapshot.subscribe()

    def unsubscribe(self, q) -> None:
        self.snapshot.unsubscribe(q)

    def ready(self) -> bool:
        return self.problem is None and self.listings > 0

    def __len__(self) -> int:
        return len(self.snapshot)

    @property
    def version(self) -> int:
        return self.snapshot.version + self._meta_changes
