"""From a listing to the line: what of the items a source lists is queued, and since when.

Each listing (a poll, a watch event, the first listing of a `--once` run) goes through here:

    new names          ledger.see: recorded pending, first seen now (the arrival times the
                       stability calculator measures)
    changed versions   `--on-change rerun`: a finished item listed at another version than
                       the one it ran at runs again (`Ledger.rerun`: a new attempt series)
    retry requests     what `workqueue retry` left for the running manager
    the rest           every listed name that still needs work is queued (dedup: once), and
                       a cancelled item the source lists again is work again - one ledger
                       lookup a name (`Ledger.state`), however many items the source lists;
                       their priorities are recorded first where they changed
                       (`priorities.Prioritizer`), so each takes its place in the line

Invariant: `waiting_since` holds the items queued because they need work and not dispatched
yet, with the time each was first queued (what `workqueue_oldest_waiting_seconds` reports).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from ..planning.measure import SlidingWindow
from ..ports import ItemLedger, Source, State
from .priorities import Prioritizer

log = logging.getLogger(__name__)


class Intake:
    def __init__(
        self,
        ledger: ItemLedger,
        source: Source,
        line,
        window: SlidingWindow,
        needs_work: Callable[[str, tuple[str, int] | None], bool],
        *,
        rerun_changed: bool = False,
        prioritizer: Prioritizer | None = None,
        waiting_is_listed: bool = False,
    ) -> None:
        """`line` is the manager's workqueue; `rerun_changed` is `--on-change rerun`;
        `needs_work(name, state)` the reconciler's, given the state just read; `prioritizer`
        places items by priority (None: the line is a FIFO); `waiting_is_listed`: what waits
        is what the last listing found waiting (a shared ledger: other managers take items
        this one never dispatches)."""
        self.ledger = ledger
        self.source = source
        self.line = line
        self.window = window
        self.needs_work = needs_work
        self.rerun_changed = rerun_changed
        self.prioritizer = prioritizer
        self.waiting_is_listed = waiting_is_listed
        self.waiting_since: dict[str, float] = {}
        # whether a listing's names are in the ledger yet: before, a ledger that knows only
        # what this manager saw (the cluster's record) counts nothing - no status is due
        self.taken_once = False

    def listed(self, names: list[str]) -> None:
        """A listing: everything in the module docstring, in that order. A `StorageFault`
        propagates (nothing more is recorded; the next listing brings the names again)."""
        new = self.ledger.see(names)
        self.taken_once = True
        if new:
            self.window.arrived(len(new))
        if self.rerun_changed:
            self._rerun_changed(names)
        for name in self.ledger.take_retry_requests():
            self.line.add(name)
        now = time.time()
        waiting = []
        state = self.ledger.state
        for name in names:  # one lookup a name: a poll over a million costs a million
            current = state(name)
            if current is not None and current[0] == State.CANCELLED:
                current = self._revived(name)
            if self.needs_work(name, current):
                waiting.append(name)
        self.prioritize(waiting)
        if self.waiting_is_listed:
            still = set(waiting)
            for name in [n for n in self.waiting_since if n not in still]:
                del self.waiting_since[name]
        for name in waiting:
            self.wait(name, now)
        self.source.listed_work(len(waiting))

    def prioritize(self, waiting: list[str]) -> None:
        """Before `waiting` is queued: each item's priority recorded where it changed (a
        no-op without a prioritizer)."""
        if self.prioritizer is not None:
            self.prioritizer.listed(waiting)

    def revisit(self, names: list[str]) -> None:
        """Finished items that changed (`--on-change rerun`), cancelled ones that came back."""
        if self.rerun_changed:
            self._rerun_changed(names)
        self._revive_returned(names)

    def wait(self, name: str, now: float) -> None:
        """Queue `name`, noting when it began to wait (kept if it was already waiting)."""
        self.waiting_since.setdefault(name, now)
        self.line.add(name)

    def left_line(self, name: str) -> None:
        """`name` was dispatched, or ended: it waits no more."""
        self.waiting_since.pop(name, None)

    def oldest(self) -> float | None:
        """Age of the oldest item waiting to be dispatched; None when none waits."""
        since = list(self.waiting_since.values())
        return time.time() - min(since) if since else None

    def _rerun_changed(self, names: list[str]) -> None:
        """Items that ran before versions were known are left alone: nothing says they
        changed."""
        for name in names:
            ran = self.ledger.version_ran(name)
            if ran is None:
                continue
            data = self.source.peek(name)
            listed = data.get("version") if data else None
            if listed is None or listed == ran:
                continue
            if self.ledger.rerun(name, listed):
                log.info("%s changed (version %s -> %s): it runs again", name, ran, listed)
                self.window.arrived(1)

    def _revive_returned(self, names: list[str]) -> None:
        for name in names:
            current = self.ledger.state(name)
            if current is not None and current[0] == State.CANCELLED:
                self._revived(name)

    def _revived(self, name: str) -> tuple[str, int] | None:
        """A cancelled item listed again runs again (the cancelled outcome stays in its
        history); its state now."""
        data = self.source.peek(name)
        if self.ledger.rerun(name, (data or {}).get("version")):
            log.info("%s is back in the source: it runs again", name)
            self.window.arrived(1)
        return self.ledger.state(name)
