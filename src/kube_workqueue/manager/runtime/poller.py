"""Learning what items exist: poll the source on a jittered period, or follow its watch stream.

Jitter: every period is drawn from interval·[1-j, 1+j] (j = 0.2 by default). A fixed ticker
keeps rival managers polling in the same phase forever, so they keep racing for the same items
(buildkite/agent-stack-k8s#953 shows two controllers on one fixed ticker contending for the
same jobs); jitter makes their relative phase drift.

Each listing is handed to `enqueue` (the manager's), which records new names in the ledger
when first seen (their arrival time is what the stability calculator measures) and diffs the
listing against it: only names that still need work are queued, so a poll over 100,000
finished items costs one dict lookup per name. The poller itself knows no ledger.

An unreachable source is logged once when it goes away and once when it is back; the poller
keeps trying at its period and loses nothing (the ledger and the source still hold everything).

With `on_removed` (`--cancel-removed`) every complete listing, and every DELETED event of the
watch stream, also goes to a `manager.runtime.removals.Removals`, and the names it proves gone are
handed to `on_removed` - unless the source's listing says its items leave only by retention
(`metadata.removals: retention`: a log whose every record is an item, trimmed oldest first),
when a removal is a trim, never a cancellation. A watch stream says nothing of what left while
it was broken, so in watch mode a complete listing is taken each time the stream is (re)opened
as well.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable

from ..durations import human
from ..errors import UserError
from ..ports import (
    AnswersBy,
    SettlesItems,
    Source,
    SourceError,
    SourceProtocolError,
    TellsLog,
    TellsRetention,
    WatchUnsupported,
)
from ..retry import reconnect
from .removal_guard import RemovalGuard
from .removals import Removals

log = logging.getLogger(__name__)


RESYNC_SECONDS = 15.0  # the longest a watch stream is trusted before it is renewed
QUIET_WAIT = 5.0  # a --once run waits this long for its source before it says it is waiting


def jittered(interval: float, jitter: float, rng: random.Random) -> float:
    return interval * (1.0 + rng.uniform(-jitter, jitter))


class Poller:
    def __init__(
        self,
        source: Source,
        enqueue: Callable[[list[str]], None],
        *,
        interval: float = 10.0,
        jitter: float = 0.2,
        rng: random.Random | None = None,
        stop: threading.Event | None = None,
        on_removed: Callable[[list[str]], None] | None = None,
        guard: RemovalGuard | None = None,
        baseline: Callable[[], set[str]] | None = None,
    ) -> None:
        """`on_removed(names)` is told what a complete listing proves removed (not what
        `guard` holds); `baseline()` - the names the ledger says still need work - stands
        for the listing before this manager's first (`removals.Removals`)."""
        if not 0 <= jitter < 1:
            raise ValueError("jitter must be in [0, 1)")
        self.source = source
        self.enqueue = enqueue
        self.interval = interval
        self.jitter = jitter
        self.rng = rng or random.Random()
        self.stop = stop or threading.Event()
        self.source_down = False
        self.last_error: Exception | None = None  # why the last listing failed
        self.on_removed = on_removed
        self.removals = Removals(guard, baseline) if on_removed is not None else None
        self.trimmed = 0  # items that left by the source's retention: never cancelled
        # a log source's identity as its last listing said (`ports.TellsLog`), and the start
        # over said last (its `at`): each said once; `on_log_change()` is told (the facts)
        self.log_facts: dict | None = None
        self._started_over_said: str | None = None
        self.on_log_change: Callable[[], None] | None = None
        self._listing = threading.Lock()  # one listing at a time (the removals compare them)
        self._listed_from = 0.0  # when the last complete listing began (time.monotonic())

    def poll_once(self) -> list[str] | None:
        """List the source and enqueue what needs work. None when the source is unreachable."""
        names = self.poll_once_listing()
        if names is not None:
            self.enqueue(names)
        return names

    def relist_now(self, asked: float) -> None:
        """A complete listing begun after `asked` (time.monotonic()), its removals judged: one
        is taken now unless another began since (items that found the source empty together
        share one)."""
        with self._listing:
            if self._listed_from <= asked:
                self._poll_once_listing(quiet=False)

    def poll_once_listing(self, *, quiet: bool = False) -> list[str] | None:
        """List the source (logging outages once); None when it is unreachable. `quiet`: an
        outage is not said (a `--once` run's first listing says it once, when it gives up)."""
        with self._listing:
            return self._poll_once_listing(quiet=quiet)

    def _poll_once_listing(self, *, quiet: bool) -> list[str] | None:
        began = time.monotonic()
        try:
            names = self.source.list_items()
        except SourceProtocolError:
            raise
        except SourceError as exc:
            if not self.source_down and not quiet:
                log.warning("%s; will keep trying every ~%gs", exc, self.interval)
            self.source_down = True
            self.last_error = exc
            return None
        if self.source_down:
            log.info("source %s is back", self.source.base_url)
        self.source_down = False
        if isinstance(self.source, TellsLog):
            self._told_log(self.source.log_facts)
        retention_only = isinstance(self.source, TellsRetention) and self.source.retention_only
        if self.removals is not None and retention_only:
            # its items leave only by retention (a log trimming its oldest records:
            # `metadata.removals`): never a cancellation - said, and nothing is cancelled
            trimmed = self.removals.trimmed(names, self.source.listing_version)
            if trimmed:
                self.trimmed += len(trimmed)
                log.info("%d item(s) left %s by its retention (trimmed from the log): not "
                         "cancelled", len(trimmed), self.source.base_url)  # fmt: skip
        elif self.removals is not None:
            gone = self.removals.listing(names, self.source.listing_version)
            if gone:
                self.on_removed(gone)
        self._listed_from = began
        return names

    def _told_log(self, facts: dict | None) -> None:
        """What a log source's listing says of its identity: a start over said once (when,
        what it was, how far it was read - its records are new items, what ran of the old
        log stays done), and the facts rewritten for `status`."""
        changed = facts != self.log_facts
        self.log_facts = facts
        over = (facts or {}).get("startedOver")
        if isinstance(over, dict) and over.get("at") != self._started_over_said:
            self._started_over_said = over.get("at")
            log.warning("source %s: %s", self.source.base_url, started_over_line(over))
        if changed and self.on_log_change is not None:
            self.on_log_change()

    def first_listing(self, timeout: float | None = None) -> list[str] | None:
        """The source's listing (nothing enqueued), tried again while it cannot be reached;
        None when stopped first. With `timeout`, a source that stays unreachable that long is
        a `UserError` (a mistyped --source must not wait forever: `--source-timeout`)."""
        began = time.monotonic()
        deadline = None if timeout is None else began + timeout
        said = False
        for delay in reconnect(self.interval).delays():
            if self.stop.is_set():
                return None
            bounded = isinstance(self.source, AnswersBy)  # (its retries within it)
            if bounded:
                self.source.answer_by = deadline
            try:
                names = self.poll_once_listing(quiet=deadline is not None)
            finally:
                if bounded:
                    self.source.answer_by = None
            if names is not None:
                return names
            if deadline is not None:
                left = deadline - time.monotonic()
                if not said and left > 0 and time.monotonic() - began >= QUIET_WAIT:
                    # Silence is kept for a moment only: a mistyped --source gets one line,
                    # a source that is slow to come up is not waited on without a word.
                    log.warning(
                        "%s; waiting for it up to %s in all (--source-timeout)",
                        self.last_error, human(timeout),
                    )  # fmt: skip
                    said = True
                if left <= 0:
                    why = self.last_error or f"source {self.source.base_url} unreachable"
                    raise UserError(
                        f"{why}; waited {human(timeout)}: check --source (a --once run waits "
                        "for its source at most --source-timeout)"
                    )
                delay = min(delay, left)
            self.stop.wait(delay)
        return None

    def watch_removals(self) -> None:
        """Take a complete listing every period only to learn what left the source, until
        `stop` (a `--once` run: its items are the first listing's, but removals still count)."""
        while not self.stop.wait(jittered(self.interval, self.jitter, self.rng)):
            self.poll_once_listing()

    def run(self) -> None:
        """Poll until `stop` is set."""
        while not self.stop.is_set():
            self.poll_once()
            self.stop.wait(jittered(self.interval, self.jitter, self.rng))

    def follow_watch(self) -> None:
        """Follow the watch stream until `stop` is set; reconnect (with jittered backoff) when it
        breaks. Every (re)connection starts with ADDED for every current item: a re-list.
        A source without a watch stream is polled instead."""
        delays = reconnect(self.interval)
        failures = 0
        if self.removals is None and isinstance(self.source, SettlesItems):
            self.poll_once_listing()  # says how its items leave (by retention: data with events)
        while not self.stop.is_set():
            # Each stream lasts one resync period, then starts over with a full re-list (as
            # informers resync): a stream that silently stops delivering - it has been seen
            # under load, an event yielded by the server that never reached the socket - heals
            # within a period instead of leaving items unseen until the manager restarts.
            resync = max(
                5, int(jittered(min(self.interval, RESYNC_SECONDS), self.jitter, self.rng))
            )
            if self.removals is not None:
                self.poll_once_listing()  # what left while no stream was open
            try:
                for event in self.source.watch(timeout_seconds=resync, read_timeout=resync + 10):
                    if self.source_down:
                        log.info("source %s is back", self.source.base_url)
                        self.source_down = False
                    failures = 0
                    self._event(event)
                    if self.stop.is_set():
                        return
            except SourceProtocolError:
                raise
            except WatchUnsupported as exc:
                log.warning("%s; polling every ~%gs instead", exc, self.interval)
                self.run()
                return
            except SourceError as exc:
                if not self.source_down:
                    log.warning("%s; reconnecting", exc)
                self.source_down = True
            self.stop.wait(jittered(delays.delay(failures), self.jitter, self.rng))
            failures += 1

    def _event(self, event: dict) -> None:
        kind, name = event.get("type"), event["item"]
        if kind == "ADDED":
            if self.removals is not None:
                self.removals.added(name)
            self.enqueue([name])
        elif kind == "DELETED" and self.removals is not None and self.removals.deleted(name):
            self.poll_once_listing()  # proved (or not) by a listing, with all that left with it


def started_over_line(over: dict) -> str:
    """A log's start over (`metadata.log.startedOver`) as one line: the manager's log and
    `status` say it so."""
    was = f" (it was {over['was']})" if over.get("was") else ""
    read = f"; read up to {over['readTo']} of the old one" if over.get("readTo") else ""
    return (f"its log started over at {over.get('at', '?')}{was}: it was made again{read} - "
            "its records are new items, what ran of the old one stays done")  # fmt: skip
