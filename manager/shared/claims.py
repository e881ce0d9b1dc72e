"""The claim side of the shared ledger: how a manager takes items from the one line, holds
them under a lease, and lets them go - a part of `ledger.PostgresLedger` (a mixin over its
state: `db`, `owner`, `lease`, `_lock` and the memory whose invariants are written there).

    claim(n)     the head of the line - claimable, unowned, ready, by priority then arrival -
                 `FOR UPDATE SKIP LOCKED`: rows another manager's claim is taking are passed
                 over, never waited for and never given twice; each row taken gets this
                 manager as `owner` and a lease (`lease_until`, the database's clock). A claim
                 that comes back empty although its snapshot saw free items was refused (every
                 one of them was being taken by a rival at that instant): counted
    turns        for `TURN_SECONDS` a new item is only the claim of the live manager whose
                 turn its name's hash gives: managers woken together by one notification do
                 not all reach for the same item (`first_to_answer`)
    release      a claim that did not start goes back (after a retry's backoff), or is parked
                 out of the line (the source did not have it) until a listing brings it again
    renew()      every lease of this manager pushed on (`runtime.claims.LeaseKeeper`, a third
                 of the lease); `expire()` lets go of other managers' leases that ran out: a
                 claimed item goes back to the line, a running one is failed (its attempt
                 counted, retried while attempts remain). No lease expires before the database
                 has been up for a whole lease: after a restart of the database, live managers
                 renew first
    a bound      a parallelism asked of the queue bounds every manager's claims together
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from ..faults import StorageFault
from ..ports import State
from .notifier import Notifier

log = logging.getLogger(__name__)

# A new item is, for its first TURN_SECONDS, only the claim of the live manager whose turn its
# name gives (its hash mod the live managers): the others leave it alone, so managers
# woken together do not all race for it. Afterwards (that manager's slots were full) anyone's.
TURN_SECONDS = 0.25
# whose turn: a hash of the name (not the arrival number: an insert that loses to a rival's
# takes a number from the sequence too, so arrival numbers come in strides of the managers)
TURN_HASH = "(hashtext(name) & 2147483647)"
SETTINGS_SECONDS = 0.5  # how stale the pause, the asked parallelism, others' count may be
RELEASE = "owner = NULL, lease_until = NULL, changed = nextval('changes')"
QUEUE_LIMIT_LOCK = 0x776F726B72  # the advisory lock claims take under an asked parallelism


class Claims:
    """Claims and leases (see the module docstring): mixed into `PostgresLedger`."""

    def parked(self, name: str) -> bool:
        """Whether `name` waits outside the line (it was gone from the source when claimed)."""
        return name in self._parked

    def claim(self, limit: int) -> list[str]:
        """Up to `limit` items from the head of the line, now this manager's (see the module
        docstring); [] when none is free. An empty claim whose snapshot still saw free items
        was refused: every one of them was being claimed by a rival at that instant (`SKIP
        LOCKED` passed over them) - counted `refused`, the contention of a shared line.

        Once a parallelism is asked of the queue, it bounds the claims of every manager
        together: the claim counts the claims held, under a lock the claims of all managers
        take in turn, and takes only what is left (nothing: [] - the queue is full, not a
        refusal). The managers' own counts of each other's work are only a first filter."""
        asked = self.wanted_parallelism()
        if asked is None:
            with self.db.cursor() as cur:
                found = self._take(cur, limit)
        else:
            with self.db.transaction() as cur:
                cur.execute("SELECT pg_advisory_xact_lock(%s)", (QUEUE_LIMIT_LOCK,))
                cur.execute("SELECT count(*) FROM items WHERE owner IS NOT NULL")
                room = asked - cur.fetchone()[0]
                found = self._take(cur, min(limit, room)) if room > 0 else []
        if found and found[0][0] is None:
            self.counters["refused"] += 1
            return []
        with self._lock:
            for name, state, attempts, version, priority in found:
                self._note(name, state, attempts, version, priority)
                self._claimed.add(name)
        self.counters["claims"] += len(found)
        return [row[0] for row in found]

    def _take(self, cur, limit: int) -> list[tuple]:
        """The claim statement: the rows taken, or one row of NULLs when it was refused."""
        free = f"claimable AND owner IS NULL AND ready_at <= %(now)s AND {self._turn()}"
        cur.execute(
            f"WITH head AS (SELECT name FROM items WHERE {free} "
            "ORDER BY priority DESC, seq LIMIT %(limit)s FOR UPDATE SKIP LOCKED), "
            "taken AS (UPDATE items SET owner = %(owner)s, lease_until = now() + "
            "make_interval(secs => %(lease)s), changed = nextval('changes') FROM head "
            "WHERE items.name = head.name "
            "RETURNING items.name, state, attempts, version, priority) "
            "SELECT name, state, attempts, version, priority FROM taken UNION ALL "
            "SELECT NULL, NULL, NULL, NULL, NULL WHERE NOT EXISTS (SELECT 1 FROM taken) "
            f"AND EXISTS (SELECT 1 FROM items WHERE {free})",
            {"now": self.clock(), "limit": limit, "owner": self.owner, "lease": self.lease},
        )
        return cur.fetchall()

    def waiting(self) -> bool:
        """Whether any item is free to claim now."""
        with self.db.cursor() as cur:
            cur.execute(
                "SELECT EXISTS (SELECT 1 FROM items WHERE claimable AND owner IS NULL "
                f"AND ready_at <= %s AND {self._turn()})",
                (self.clock(),),
            )
            return cur.fetchone()[0]

    def _turn(self) -> str:
        """The condition that leaves other managers' new items alone (`TURN_SECONDS`)."""
        rank, live = self._peers
        if live <= 1:
            return "true"
        return (f"(listed_at < now() - interval '{TURN_SECONDS} seconds' "
                f"OR mod({TURN_HASH}, {int(live)}) = {int(rank)})")  # fmt: skip

    def holds(self, name: str) -> bool:
        return name in self._claimed

    def release(self, name: str, *, ready_in: float = 0.0, park: bool = False) -> None:
        """Let go of a claimed item that did not start: claimable again after `ready_in`
        seconds, or (`park`: it needs no work, or was gone from the source) out of the line
        until a listing says it needs work again (`unpark`). Nothing when it is not ours."""
        with self.db.cursor() as cur:
            cur.execute(
                f"UPDATE items SET {RELEASE}, claimable = claimable AND NOT %s, "
                "ready_at = greatest(ready_at, %s) "
                "WHERE name = %s AND owner = %s AND state <> 'running'",
                (park, self.clock() + ready_in, name, self.owner),
            )
            released = cur.rowcount > 0
            if released and not park:
                cur.execute("NOTIFY workqueue_line")
        with self._lock:
            self._claimed.discard(name)
            if park and released:
                self._parked.add(name)

    def unpark(self, names: list[str]) -> None:
        """Listed again: back in the line."""
        with self.db.cursor() as cur:
            cur.execute(
                "UPDATE items SET claimable = true, changed = nextval('changes') "
                "WHERE name = ANY(%s) AND NOT claimable AND owner IS NULL "
                "AND state IN ('pending', 'failed') AND attempts < %s",
                (names, self.max_attempts),
            )
            cur.execute("NOTIFY workqueue_line")
        with self._lock:
            self._parked.difference_update(names)

    # -- leases ----------------------------------------------------------------------------

    def renew(self) -> int:
        """Push on every lease this manager holds; how many it holds."""
        with self.db.cursor() as cur:
            cur.execute(
                "UPDATE items SET lease_until = now() + make_interval(secs => %s) WHERE owner = %s",
                (self.lease, self.owner),
            )
            return cur.rowcount

    def expire(self) -> list[tuple[str, str]]:
        """Let go of the claims whose lease ran out (see the module docstring): (name, owner)
        of each."""
        with self.db.cursor() as cur:
            cur.execute(
                "WITH gone AS (SELECT name, owner FROM items WHERE owner IS NOT NULL "
                "AND lease_until < now() "
                "AND now() - pg_postmaster_start_time() > make_interval(secs => %s) "
                "FOR UPDATE SKIP LOCKED) "
                "UPDATE items SET state = CASE WHEN state = 'running' THEN 'failed' ELSE state "
                "END, last_error = CASE WHEN state = 'running' THEN 'its manager ' || "
                "gone.owner || ' stopped renewing its claim' ELSE last_error END, "
                "finished = CASE WHEN state = 'running' THEN %s ELSE finished END, "
                "claimable = (state <> 'running' OR attempts < %s), ready_at = 0, "
                "owner = NULL, lease_until = NULL, changed = nextval('changes') "
                "FROM gone WHERE items.name = gone.name RETURNING items.name, gone.owner",
                (self.lease, self.clock(), self.max_attempts),
            )
            found = cur.fetchall()
            if found:
                cur.execute("NOTIFY workqueue_line")
        self.counters["expired"] += len(found)
        return found

    def keep_leases(self) -> None:
        """One round of `claims.LeaseKeeper`: renew, then let go of what ran out."""
        self.renew()
        with self.db.cursor() as cur:  # this manager lives (what `status` counts)
            cur.execute("UPDATE managers SET said = now() WHERE id = %s", (self.owner,))
            cur.execute("SELECT id FROM managers WHERE said > now() - make_interval(secs => lease)")
            live = sorted({row[0] for row in cur.fetchall()} | {self.owner})
        self._peers = (live.index(self.owner), len(live))
        for name, owner in self.expire():
            log.warning("%s: the claim of manager %s ran out (it stopped renewing it): back "
                        "in line", name, owner)  # fmt: skip

    def claim_counters(self) -> dict[str, float]:
        return dict(self.counters)

    def first_to_answer(self, payload: str) -> bool:
        """Whether this manager answers a notification of new items at once: whether the
        first new item (its name's hash, the payload) is its turn (`TURN_SECONDS`); the
        others look once the turn is over. A notification without a number is everyone's."""
        rank, live = self._peers
        try:
            return live <= 1 or int(payload) % live == rank
        except ValueError:
            return True

    def on_line_changed(self, callback: Callable[[str], None]) -> None:
        """Call `callback(payload)` on each notification of the line (`Notifier`)."""
        if self._notifier is None:
            self._notifier = Notifier(self.db).start()
        self._notifier.callbacks.append(callback)

    def owned(self) -> list[tuple[str, str, int]]:
        """(name, state, attempts) of every item this manager holds."""
        with self.db.cursor() as cur:
            cur.execute(
                "SELECT name, state, attempts FROM items WHERE owner = %s ORDER BY seq",
                (self.owner,),
            )
            return cur.fetchall()

    def release_mine(self) -> None:
        for name, state, _ in self.owned():
            if state == State.RUNNING:
                self.requeue(name)
            else:
                self.release(name)

    def running_rows(self) -> list[tuple[str, int, None, None]]:
        """This manager's running items (what a restart of it finds: `recovery.take_back`)."""
        return [(n, a, None, None) for n, s, a in self.owned() if s == State.RUNNING]

    def others_running(self) -> int:
        """Items other managers run now (read through the claims' index; at most
        `SETTINGS_SECONDS` old, and the last count while the database does not answer)."""
        at, count = self._others
        if time.monotonic() - at < SETTINGS_SECONDS:
            return count
        try:
            with self.db.cursor() as cur:
                cur.execute(
                    "SELECT count(*) FROM items WHERE owner IS NOT NULL AND owner <> %s "
                    "AND state = 'running'",
                    (self.owner,),
                )
                count = cur.fetchone()[0]
        except StorageFault:
            pass  # dispatch is held meanwhile: the last count stands
        self._others = (time.monotonic(), count)
        return count
