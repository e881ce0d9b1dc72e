"""Liveness per manager: one heartbeat each, and when a silent one's claims may be taken.

Every manager has one row in `managers` and beats it - adds one to its `beat` counter - every
third of its lease, on a connection of its own (a long refresh or a held claim on the main one
never delays it). A claim lives while its owner beats: there is no lease per row, so what a
fleet writes at rest is one row per manager per third of a lease, whatever it holds.

When is a silent manager dead? Not when some clock says so. Each manager observes the others'
counters (`OBSERVE`, a read, every sweep) and notes, on its own monotonic clock, when each
counter last moved. A rival is declared dead only when its counter has not moved for a whole
lease *of a working database as this observer saw it*: every look in that time answered, the
database took writes (not read-only), and no look was late (this observer was not stopped,
starved or cut off itself). Any failure, read-only answer or late look restarts every rival's
count from the next good look. So:

    an outage of any kind (refused, limited connections, a full disk, read-only, a failover, a
        restart of the server) gives every manager a whole lease from its end to beat again -
        the first manager back expires nothing;
    a step of the database's clock (or any machine's wall clock) changes nothing: no clock
        is compared with another, only counters with one observer's monotonic time;
    a manager stopped (SIGSTOP) or cut off alone longer than its lease is declared dead by
        the others, as it must be for its items to run at all; when it wakes, its beat finds
        no row: it learns that its claims are gone (`on_declared_dead`), counts them lost and
        ends what it still runs of them, then registers afresh.

The declaration is fenced: `DECLARE_DEAD` deletes the rival's row only if its counter is still
the one observed (a beat that lands first keeps it alive), and the claim statement locks its
own manager's row FOR SHARE, so no claim slips in beside a declaration.

Invariant: `_seen[rival]` is (the counter last seen, when it last moved or the window last
restarted); every entry's time is at or after `_window_start`. Used by the heartbeat's thread
only (`runtime.claims.Heartbeat`), except `peers`, which is replaced whole.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable

from ..faults import StorageFault
from . import manager_statements as managers_sql
from . import statements as sql
from .database import Database

log = logging.getLogger(__name__)
ORPHAN = "(no row)"


class Liveness:
    def __init__(
        self,
        db: Database,
        owner: str,
        lease: float,
        *,
        max_attempts: int,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        """`db`: a connection of the heartbeat's own; `owner`: this manager's id; `lease`:
        seconds its claims outlive its last beat (as its rivals count them)."""
        self.db = db
        self.owner = owner
        self.lease = lease
        self.max_attempts = max_attempts
        self.clock = clock
        self.wall = wall
        self.beat_every = lease / 3
        # a look later than this after the last good one restarts every count (see above)
        self.late_after = max(2.0, lease / 3)
        self._seen: dict[str, tuple[int | None, float]] = {}
        self._lease_of: dict[str, float] = {}
        self._last_good: float | None = None  # when the last good look was
        self._window_start: float | None = None  # since when every look was good
        self._last_beat: float | None = None  # when this manager last beat
        self._last_orphans = -1e18
        self.peers: tuple[int, int] = (0, 1)  # (this manager's rank among the live, how many)
        self.on_declared_dead: Callable[[], None] | None = None
        self.offers: dict[str, str] = {}  # what this manager offers (`placed`), with its row
        self.expired = 0  # rivals' items this manager let go

    # -- this manager --------------------------------------------------------------------

    def register(self) -> None:
        """Say this manager is here (at start, and after it was declared dead)."""
        from psycopg.types.json import Jsonb

        self.db.run(
            managers_sql.REGISTER, owner=self.owner, lease=self.lease, offers=Jsonb(self.offers)
        )
        self._last_beat = self.clock()

    def beat_due(self) -> bool:
        return self._last_beat is None or self.clock() - self._last_beat >= self.beat_every

    def beat(self) -> None:
        """One heartbeat. When rivals declared this manager dead meanwhile (its row is gone),
        `on_declared_dead` is told first, then it registers afresh. `StorageFault` when the
        database does not take it."""
        found = self.db.run(managers_sql.BEAT, owner=self.owner)
        if not found:
            log.warning("this manager (%s) was silent longer than its lease (stopped, or cut "
                        "off from the database): the other managers took its claims",
                        self.owner)  # fmt: skip
            if self.on_declared_dead is not None:
                self.on_declared_dead()
            self.register()
            return
        self._last_beat = self.clock()

    def leave(self) -> None:
        """This manager stops cleanly and holds nothing: its row goes."""
        self.db.run(managers_sql.LEAVE, owner=self.owner)

    # -- the others ----------------------------------------------------------------------

    def sweep(self) -> list[tuple[str, str]]:
        """One look at every manager's counter, and the items of those found dead let go:
        (item, its dead owner) of each. A failed look restarts the window and raises the
        `StorageFault`."""
        now = self.clock()
        try:
            read_only, managers = self.db.run(managers_sql.OBSERVE)[0]
            orphans = self._orphans(now)
        except StorageFault:
            self._restart_window(None)
            raise
        if read_only:  # no time in which anyone could beat
            self._restart_window(None)
            return []
        if self._last_good is None or now - self._last_good > self.late_after:
            self._restart_window(now)
        self._last_good = now
        rows = [(rival, beat, lease) for rival, beat, lease in _decoded(managers)]
        rows += [(rival, None, self.lease) for rival in orphans]
        present = set()
        for rival, beat, lease in rows:
            present.add(rival)
            self._lease_of[rival] = float(lease)
            known = self._seen.get(rival)
            if known is None or known[0] != beat:
                self._seen[rival] = (beat, now)
        for gone in set(self._seen) - present:
            del self._seen[gone]
            self._lease_of.pop(gone, None)
        live = sorted({r for r, (_, at) in self._seen.items() if now - at < self._lease_of[r]}
                      | {self.owner})  # fmt: skip
        self.peers = (live.index(self.owner), len(live))
        let_go: list[tuple[str, str]] = []
        for rival, (beat, at) in list(self._seen.items()):
            if rival == self.owner or now - at < self._lease_of[rival]:
                continue
            let_go += [(item, rival) for item in self._declare_dead(rival, beat)]
        return let_go

    def _orphans(self, now: float) -> list[str]:
        """Owners of claims no managers row names (read every third of a lease)."""
        if now - self._last_orphans < self.lease / 3:
            return [r for r, (beat, _) in self._seen.items() if beat is None]
        self._last_orphans = now
        return [row[0] for row in self.db.run(managers_sql.ORPHANS)]

    def _restart_window(self, now: float | None) -> None:
        """Every count starts again at `now` (a good look), or at the next good look."""
        self._last_good = now
        self._window_start = now
        for rival, (beat, _) in list(self._seen.items()):
            self._seen[rival] = (beat, now if now is not None else self.clock())

    def _declare_dead(self, rival: str, beat: int | None) -> list[str]:
        """Declare `rival` dead if its counter is still `beat` (None: an orphan owner), and
        let go of its items; their names (none when it beat after all)."""
        with self.db.transaction() as session:
            if beat is not None and not session.run(
                managers_sql.DECLARE_DEAD, rival=rival, beat=beat
            ):
                return []  # it beat meanwhile: alive
            names = [row[0] for row in session.run(
                managers_sql.RELEASE_DEAD, rival=rival, now=self.wall(),
                max_attempts=self.max_attempts,
            )]  # fmt: skip
            if names:
                session.run(sql.NOTIFY_LINE)
        self._seen.pop(rival, None)
        self.expired += len(names)
        who = "an owner no manager row names" if beat is None else "its manager"
        log.warning("manager %s did not beat for %gs of a working database: %d claim(s) of "
                    "%s let go (%s)", rival, self._lease_of.get(rival, self.lease), len(names),
                    who, ", ".join(names[:5]) + ("…" if len(names) > 5 else ""))  # fmt: skip
        return names


def _decoded(managers) -> list[tuple[str, int, float]]:
    if isinstance(managers, str):
        managers = json.loads(managers)
    return [(m[0], int(m[1]), float(m[2])) for m in managers]
