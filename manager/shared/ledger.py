"""`PostgresLedger`: one queue's record in PostgreSQL, shared by every manager that works it.

It is the `Ledger` port (`manager.ports`) plus claims (`ClaimsWork`): a manager never starts
an item it has not claimed, and it claims only when it holds a free slot.

    claim(n)     the head of the line - claimable, unowned, ready, by priority then arrival -
                 `FOR UPDATE SKIP LOCKED`: rows another manager's claim is taking are passed
                 over, never waited for and never given twice; each row taken gets this
                 manager as `owner` and a lease (`lease_until`, the database's clock)
    start        claimed -> running, an attempt counted - only while this manager owns it
    finish, requeue, cancel
                 the outcome written and the claim let go in one statement - again only while
                 this manager owns it: a manager whose claim was taken (its lease ran out)
                 writes nothing over the new owner's run and counts the claim lost
    renew()      every lease of this manager pushed on (`claims.LeaseKeeper`, a third of the
                 lease); `expire()` lets go of other managers' leases that ran out: a claimed
                 item goes back to the line, a running one is failed (its attempt counted,
                 retried while attempts remain). No lease expires before the database has been
                 up for a whole lease: after a restart of the database, live managers renew
                 first.

Reads are served from memory, as the SQLite ledger's are (`state` is asked for every listed
name on every poll): `refresh()` reads the rows changed since it last looked (the `changes`
sequence), and every `RELOAD_SECONDS` all of them (a write whose sequence number was taken
before another's but committed after it is then seen too).

Invariant: `_state`, `_versions`, `_priorities` and `_parked` are what the database said at the
last refresh, overlaid with this manager's own writes since; they change under `_lock`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable

from ..faults import StorageFault
from ..ports import FINISHED, PENDING_PAIR, ClaimLost, Row, State, pair
from . import schema
from .database import Database

log = logging.getLogger(__name__)
RELOAD_SECONDS = 60.0
# A new item is, for its first TURN_SECONDS, only the claim of the live manager whose turn its
# name gives (its hash mod the live managers): the others leave it alone, so managers
# woken together do not all race for it. Afterwards (that manager's slots were full) anyone's.
TURN_SECONDS = 0.25
# whose turn: a hash of the name (not the arrival number: an insert that loses to a rival's
# takes a number from the sequence too, so arrival numbers come in strides of the managers)
TURN_HASH = "(hashtext(name) & 2147483647)"
SETTINGS_SECONDS = 0.5  # how stale the pause and the asked parallelism may be
ROW = ("name, state, attempts, first_seen, started, finished, exit_code, log_path, last_error, "
       "version, priority")  # fmt: skip
RELEASE = "owner = NULL, lease_until = NULL, changed = nextval('changes')"


class PostgresLedger:
    arrivals_known = True
    keeps_status = False  # `workqueue status` reads the database itself

    def __init__(
        self,
        db: Database,
        owner: str,
        *,
        lease: float = 30.0,
        max_attempts: int = 3,
        backoff: Callable[[int], float] = lambda attempts: 0.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`owner`: this manager's id (stable across its restarts: it takes back its own
        claims); `lease`: seconds a claim lasts unrenewed; `backoff(attempts)`: the wait
        before a failed item may be claimed again."""
        self.db = db
        self.where = db.where
        self.owner = owner
        self.lease = lease
        self.max_attempts = max_attempts
        self.backoff = backoff
        self.clock = clock
        self._lock = threading.Lock()
        self._state: dict[str, tuple[str, int]] = {}
        self._versions: dict[str, str] = {}
        self._priorities: dict[str, int] = {}
        self._parked: set[str] = set()  # waiting, but left out of the line (gone from the source)
        self._claimed: set[str] = set()  # claimed by this manager, not started
        self._seen_change = 0
        self._peers = (0, 1)  # (this manager's rank among the live ones, how many live)
        self._reloaded = 0.0
        self._settings: tuple[float, tuple] = (0.0, (None, None, None))
        self._others: tuple[float, int] = (0.0, 0)  # (when read, others' running items)
        # what this manager's claims met (`workqueue_claims*` metrics; `claim` counts refusals)
        self.counters = {"claims": 0, "refused": 0, "lost": 0, "expired": 0, "done": 0}
        self.on_recorded: Callable[[str], None] | None = None
        self._notifier: Notifier | None = None
        schema.migrate(db)
        self.refresh(full=True)

    # -- memory ----------------------------------------------------------------------------

    def refresh(self, *, full: bool = False) -> None:
        """Read what changed since the last refresh (everything when `full`, or when the last
        full read is `RELOAD_SECONDS` old). A `StorageFault` when the database does not answer."""
        now = time.monotonic()
        full = full or now - self._reloaded >= RELOAD_SECONDS
        since = 0 if full else self._seen_change
        with self.db.cursor() as cur:
            cur.execute(
                "SELECT name, state, attempts, version, priority, claimable, owner IS NULL, "
                "changed FROM items WHERE changed > %s",
                (since,),
            )
            found = cur.fetchall()
        with self._lock:
            if full:
                self._state, self._versions, self._priorities, self._parked = {}, {}, {}, set()
                self._reloaded = now
            for name, state, attempts, version, priority, claimable, free, changed in found:
                self._note(name, state, attempts, version, priority)
                if state in (State.PENDING, State.FAILED) and free and not claimable:
                    self._parked.add(name)
                else:
                    self._parked.discard(name)
                self._seen_change = max(self._seen_change, changed)

    def _note(self, name: str, state: str, attempts: int, version, priority: int) -> None:
        self._state[name] = pair(state, attempts)
        if version is not None:
            self._versions[name] = version
        else:
            self._versions.pop(name, None)
        if priority:
            self._priorities[name] = priority
        else:
            self._priorities.pop(name, None)

    def state(self, name: str) -> tuple[str, int] | None:
        return self._state.get(name)

    def version_ran(self, name: str) -> str | None:
        return self._versions.get(name)

    def priority(self, name: str) -> int:
        return self._priorities.get(name, 0)

    def gave_up(self, name: str) -> bool:
        return False  # failures are retried up to --max-attempts, as on the local backend

    def parked(self, name: str) -> bool:
        """Whether `name` waits outside the line (it was gone from the source when claimed)."""
        return name in self._parked

    # -- the items -------------------------------------------------------------------------

    def see(self, names: Iterable[str]) -> list[str]:
        """New names recorded pending (their arrival order is the order given)."""
        self.refresh()
        fresh = [n for n in dict.fromkeys(names) if n not in self._state]
        if not fresh:
            return []
        with self.db.cursor() as cur:
            cur.execute(
                "INSERT INTO items (name, first_seen) SELECT n, %s FROM unnest(%s::text[]) "
                "WITH ORDINALITY AS t(n, i) ORDER BY i ON CONFLICT (name) DO NOTHING "
                f"RETURNING name, {TURN_HASH}",
                (self.clock(), fresh),
            )
            found = cur.fetchall()
            new = [row[0] for row in found]
            if new:  # the payload names who answers first (`first_to_answer`)
                cur.execute("SELECT pg_notify('workqueue_line', %s)", (str(found[0][1]),))
        with self._lock:
            for name in fresh:  # a rival's insert of the same name counts as seen too
                self._state.setdefault(name, PENDING_PAIR)
        return new

    def prioritize(self, changes: dict[str, int]) -> None:
        if not changes:
            return
        with self.db.cursor() as cur:
            cur.execute(
                "UPDATE items SET priority = c.p, changed = nextval('changes') FROM "
                "unnest(%s::text[], %s::int[]) AS c(n, p) WHERE items.name = c.n",
                (list(changes), list(changes.values())),
            )
        with self._lock:
            for name, priority in changes.items():
                if priority:
                    self._priorities[name] = priority
                else:
                    self._priorities.pop(name, None)

    def claim(self, limit: int) -> list[str]:
        """Up to `limit` items from the head of the line, now this manager's (see the module
        docstring); [] when none is free. An empty claim whose snapshot still saw free items
        was refused: every one of them was being claimed by a rival at that instant (`SKIP
        LOCKED` passed over them) - counted `refused`, the contention of a shared line."""
        free = f"claimable AND owner IS NULL AND ready_at <= %(now)s AND {self._turn()}"
        with self.db.cursor() as cur:
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
            found = cur.fetchall()
        if found and found[0][0] is None:
            self.counters["refused"] += 1
            return []
        with self._lock:
            for name, state, attempts, version, priority in found:
                self._note(name, state, attempts, version, priority)
                self._claimed.add(name)
        self.counters["claims"] += len(found)
        return [row[0] for row in found]

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
        seconds, or (`park`: it was gone from the source) out of the line until a listing
        brings it again (`unpark`)."""
        with self.db.cursor() as cur:
            cur.execute(
                f"UPDATE items SET {RELEASE}, claimable = claimable AND NOT %s, "
                "ready_at = greatest(ready_at, %s) "
                "WHERE name = %s AND owner = %s AND state <> 'running'",
                (park, self.clock() + ready_in, name, self.owner),
            )
            if cur.rowcount and not park:
                cur.execute("NOTIFY workqueue_line")
        with self._lock:
            self._claimed.discard(name)
            if park:
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

    def start(self, name: str, log_path: str, version: str | None = None) -> int:
        with self.db.cursor() as cur:
            cur.execute(
                "UPDATE items SET state = 'running', attempts = attempts + 1, started = %s, "
                "finished = NULL, exit_code = NULL, log_path = %s, version = %s, "
                "changed = nextval('changes') WHERE name = %s AND owner = %s "
                "AND state IN ('pending', 'failed') RETURNING attempts",
                (self.clock(), log_path, version, name, self.owner),
            )
            found = cur.fetchone()
        with self._lock:
            self._claimed.discard(name)
        if found is None:
            self.counters["lost"] += 1
            raise ClaimLost(f"{name}: this manager's claim on it is gone")
        with self._lock:
            self._note(name, State.RUNNING.value, found[0], version, self.priority(name))
        return found[0]

    def _owned(self, name: str, sets: str, values: tuple, *, back_in_line: bool = False) -> bool:
        """One write of an item this manager owns, its claim let go with it; False (the claim
        counted lost, nothing written) when it owns it no more. `back_in_line`: the item may
        be claimed at once (the line is notified; a retry's backoff is found by polling)."""
        with self.db.cursor() as cur:
            cur.execute(
                f"UPDATE items SET {sets}, {RELEASE} WHERE name = %s AND owner = %s "
                "RETURNING state, attempts, version, priority",
                (*values, name, self.owner),
            )
            found = cur.fetchone()
            if found is not None and back_in_line:
                cur.execute("NOTIFY workqueue_line")
        with self._lock:
            self._claimed.discard(name)
        if found is None:
            self.counters["lost"] += 1
            log.warning("%s: its claim was lost (its lease ran out): this outcome is not "
                        "recorded over the run of the manager that took it", name)  # fmt: skip
            return False
        with self._lock:
            self._note(name, *found)
        if self.on_recorded is not None:
            self.on_recorded(name)
        return True

    def finish(self, name: str, succeeded: bool, exit_code: int | None, error: str | None,
               *, at: float | None = None) -> None:  # fmt: skip
        now = self.clock() if at is None else at
        state = State.SUCCEEDED if succeeded else State.FAILED
        attempts = (self.state(name) or (None, 0))[1]
        if self._owned(
            name,
            "state = %s, finished = %s, exit_code = %s, last_error = %s, "
            "claimable = %s, ready_at = %s",
            (state.value, now, exit_code, error, not succeeded and attempts < self.max_attempts,
             now + self.backoff(attempts)),
        ):  # fmt: skip
            self.counters["done"] += 1

    def requeue(self, name: str) -> None:
        self._owned(
            name,
            "state = 'pending', attempts = greatest(attempts - 1, 0), started = NULL, "
            "claimable = true, ready_at = 0",
            (),
            back_in_line=True,
        )

    def cancel(self, name: str) -> bool:
        """pending, running (by this manager) or failed -> cancelled; an item another manager
        runs is that manager's to cancel."""
        with self.db.cursor() as cur:
            cur.execute(
                f"UPDATE items SET state = 'cancelled', finished = %s, claimable = false, "
                f"{RELEASE} WHERE name = %s AND state IN ('pending', 'running', 'failed') "
                "AND (owner IS NULL OR owner = %s) RETURNING state, attempts, version, priority",
                (self.clock(), name, self.owner),
            )
            found = cur.fetchone()
        if found is None:
            return False
        with self._lock:
            self._note(name, *found)
        if self.on_recorded is not None:
            self.on_recorded(name)
        return True

    def rerun(self, name: str, version: str | None = None) -> bool:
        """A finished item runs again (a new version, or back in the source): its outcome
        kept in `runs`, a new attempt series."""
        current = self.state(name)
        if current is None or current[0] not in FINISHED:
            return False
        with self.db.transaction() as cur:
            cur.execute(
                "INSERT INTO runs (name, version, state, attempts, started, finished, "
                "exit_code, last_error) SELECT name, version, state, attempts, started, "
                "finished, exit_code, last_error FROM items WHERE name = %s "
                "AND state IN ('succeeded', 'failed', 'cancelled') AND owner IS NULL",
                (name,),
            )
            if not cur.rowcount:
                return False
            cur.execute(
                "UPDATE items SET state = 'pending', attempts = 0, first_seen = %s, "
                "started = NULL, finished = NULL, exit_code = NULL, last_error = NULL, "
                "claimable = true, ready_at = 0, changed = nextval('changes') WHERE name = %s",
                (self.clock(), name),
            )
            cur.execute("NOTIFY workqueue_line")
        with self._lock:
            self._state[name] = PENDING_PAIR
        return True

    def retry(self, name: str) -> bool:
        """A failed or cancelled item runs again on purpose (`workqueue retry`): pending, its
        attempts reset; every manager's next claim may take it."""
        with self.db.cursor() as cur:
            cur.execute(
                "UPDATE items SET state = 'pending', attempts = 0, last_error = NULL, "
                "claimable = true, ready_at = 0, changed = nextval('changes') "
                "WHERE name = %s AND state IN ('failed', 'cancelled') AND owner IS NULL",
                (name,),
            )
            done = bool(cur.rowcount)
            if done:
                cur.execute("NOTIFY workqueue_line")
        return done

    def take_retry_requests(self) -> list[str]:
        return []  # `workqueue retry` writes the row itself: every manager sees it at once

    def history(self, name: str) -> list[dict]:
        with self.db.cursor() as cur:
            cur.execute(
                "SELECT version, state, attempts, finished FROM runs WHERE name = %s ORDER BY id",
                (name,),
            )
            found = cur.fetchall()
        return [{"version": v, "state": s, "attempts": a, "finished": f} for v, s, a, f in found]

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
        `SETTINGS_SECONDS` old, and 0 while the database does not answer)."""
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

    # -- the whole queue -------------------------------------------------------------------

    def row(self, name: str) -> Row | None:
        found = self._select("WHERE name = %s", (name,))
        return found[0] if found else None

    def rows(self, state: str | None = None) -> list[Row]:
        if state is None:
            return self._select("ORDER BY name", ())
        return self._select("WHERE state = %s ORDER BY name", (state,))

    def _select(self, where: str, values: tuple) -> list[Row]:
        with self.db.cursor() as cur:
            cur.execute(f"SELECT {ROW} FROM items {where}", values)
            return [Row(*found) for found in cur.fetchall()]

    def counts(self) -> dict[str, int]:
        counts = {s.value: 0 for s in State}
        with self.db.cursor() as cur:
            cur.execute("SELECT state, count(*) FROM items GROUP BY state")
            counts.update(dict(cur.fetchall()))
        return counts

    def __len__(self) -> int:
        return len(self._state)

    # -- the queue's settings --------------------------------------------------------------

    def _read_settings(self) -> tuple:
        at, settings = self._settings
        if time.monotonic() - at < SETTINGS_SECONDS:
            return settings
        with self.db.cursor() as cur:
            cur.execute("SELECT paused_since, parallelism, removals_accepted FROM queue")
            settings = cur.fetchone()
        self._settings = (time.monotonic(), settings)
        return settings

    def paused_since(self) -> float | None:
        return self._read_settings()[0]

    def wanted_parallelism(self) -> int | None:
        return self._read_settings()[1]

    def removals_accepted(self) -> float | None:
        return self._read_settings()[2]

    def set_setting(self, column: str, value) -> None:
        """Write one of the queue's settings (`paused_since`, `parallelism`,
        `removals_accepted`): every manager reads it within `SETTINGS_SECONDS`."""
        assert column in ("paused_since", "parallelism", "removals_accepted")
        with self.db.cursor() as cur:
            cur.execute(f"UPDATE queue SET {column} = %s", (value,))
        self._settings = (0.0, self._settings[1])

    def want_parallelism(self, parallelism: int) -> None:
        self.set_setting("parallelism", parallelism)

    def report(self, status: dict) -> None:
        pass  # `workqueue status` reads the items table itself

    def note_manager(self, facts: dict | None) -> None:
        from psycopg.types.json import Jsonb

        with self.db.cursor() as cur:
            if facts is None:
                cur.execute("DELETE FROM managers WHERE id = %s", (self.owner,))
            else:
                cur.execute(
                    "INSERT INTO managers (id, facts, lease, said) VALUES (%s, %s, %s, now()) "
                    "ON CONFLICT (id) DO UPDATE SET facts = excluded.facts, "
                    "lease = excluded.lease, said = now()",
                    (self.owner, Jsonb(facts), self.lease),
                )

    def probe(self) -> None:
        with self.db.cursor() as cur:
            cur.execute("SELECT 1")

    def close(self) -> None:
        if self._notifier is not None:
            self._notifier.stop()
        self.db.close()


class Notifier:
    """LISTENs for `workqueue_line` on a connection of its own and calls its callbacks on
    each notification (and after a reconnect: what changed meanwhile was not notified)."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.callbacks: list[Callable[[], None]] = []
        self._stopped = threading.Event()
        self._conn = None

    def start(self) -> Notifier:
        threading.Thread(target=self._run, name="line-notifications", daemon=True).start()
        return self

    def _run(self) -> None:
        while not self._stopped.is_set():
            try:
                self._conn = self.db.listener()
                self._conn.execute("LISTEN workqueue_line")
                self._tell("")
                while not self._stopped.is_set():
                    for notice in self._conn.notifies(timeout=1.0, stop_after=1):
                        self._tell(notice.payload)
            except Exception:  # the database went away: listen again when it is back
                self._close()
                self._stopped.wait(1.0)
        self._close()

    def _tell(self, payload: str) -> None:
        for callback in self.callbacks:
            callback(payload)

    def _close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:
                pass

    def stop(self) -> None:
        self._stopped.set()
