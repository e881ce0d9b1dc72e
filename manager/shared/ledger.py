"""`PostgresLedger`: one queue's record in PostgreSQL, shared by every manager that works it.

It is the `Ledger` port (`manager.ports`) plus claims (`ClaimsWork`, in `claims.py`): a
manager never starts an item it has not claimed, and it claims only when it holds a free slot.

    start        claimed -> running, an attempt counted - only while this manager owns it
    finish, requeue, cancel
                 the outcome written and the claim let go in one statement - again only while
                 this manager owns it: a manager whose claim was taken (its lease ran out)
                 writes nothing over the new owner's run and counts the claim lost

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

from ..ports import FINISHED, PENDING_PAIR, ClaimLost, Row, State, keep_priority, pair
from . import schema
from .claims import RELEASE, SETTINGS_SECONDS, TURN_HASH, Claims
from .database import Database
from .notifier import Notifier

log = logging.getLogger(__name__)
RELOAD_SECONDS = 60.0
ROW = ("name, state, attempts, first_seen, started, finished, exit_code, log_path, last_error, "
       "version, priority")  # fmt: skip


class PostgresLedger(Claims):
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
        self._reloaded: float | None = None  # when everything was last read (None: never)
        self._settings: tuple[float, tuple] = (0.0, (None, None, None))
        self._others: tuple[float, int] = (0.0, 0)  # (when read, others' running items)
        # what this manager's claims met (`workqueue_claims*` metrics; `claim` counts refusals)
        self.counters = {"claims": 0, "refused": 0, "lost": 0, "expired": 0, "done": 0}
        self.on_recorded: Callable[[str], None] | None = None
        self._notifier: Notifier | None = None
        schema.migrate(db)  # (memory is read at the first `refresh`: a command never needs it)

    # -- memory ----------------------------------------------------------------------------

    def refresh(self, *, full: bool = False) -> None:
        """Read what changed since the last refresh (everything when `full`, the first time,
        or when the last full read is `RELOAD_SECONDS` old). A `StorageFault` when the
        database does not answer."""
        now = time.monotonic()
        full = full or self._reloaded is None or now - self._reloaded >= RELOAD_SECONDS
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
        keep_priority(self._priorities, name, priority)

    def state(self, name: str) -> tuple[str, int] | None:
        return self._state.get(name)

    def version_ran(self, name: str) -> str | None:
        return self._versions.get(name)

    def priority(self, name: str) -> int:
        return self._priorities.get(name, 0)

    def gave_up(self, name: str) -> bool:
        return False  # failures are retried up to --max-attempts, as on the local backend

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
                keep_priority(self._priorities, name, priority)

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
            # a freed slot of a bounded queue is news too: a manager may be waiting for it
            if found is not None and (back_in_line or self.wanted_parallelism() is not None):
                cur.execute("NOTIFY workqueue_line")
        with self._lock:
            self._claimed.discard(name)
        if found is None:
            self.counters["lost"] += 1
            log.warning("%s: its claim was lost (its lease ran out): this outcome is not "
                        "recorded over the run of the manager that took it", name)  # fmt: skip
            return False
        self._recorded(name, found)
        return True

    def _recorded(self, name: str, found: tuple) -> None:
        """An end written (state, attempts, version, priority as the row has them now): kept
        in memory, and told to `on_recorded` (the local backend's keeper may forget it)."""
        with self._lock:
            self._note(name, *found)
        if self.on_recorded is not None:
            self.on_recorded(name)

    def finish(self, name: str, succeeded: bool, exit_code: int | None, error: str | None,
               *, at: float | None = None) -> None:  # fmt: skip
        """running -> succeeded | failed, the claim let go; a failure with attempts left (the
        row's count) may be claimed again after its backoff."""
        now = self.clock() if at is None else at
        state = State.SUCCEEDED if succeeded else State.FAILED
        attempts = (self.state(name) or (None, 1))[1]  # (for the backoff only)
        if self._owned(
            name,
            "state = %s, finished = %s, exit_code = %s, last_error = %s, "
            "claimable = (%s AND attempts < %s), ready_at = %s",
            (state.value, now, exit_code, error, not succeeded, self.max_attempts,
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
        self._recorded(name, found)
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


def open_shared(
    url: str, owner: str, *, lease: float, max_attempts: int, retry_backoff: tuple[float, float]
) -> PostgresLedger:
    """A manager's shared ledger at `url` under `owner`, its schema brought up to date; a
    failed retry waits `retry_backoff` (first wait, cap) doubling, as the manager's own
    retries do. Its connection is closed again when it cannot be opened."""
    from ..retry import Backoff

    db = Database(url)
    backoff = Backoff(*retry_backoff)
    try:
        return PostgresLedger(
            db, owner, lease=lease, max_attempts=max_attempts,
            backoff=lambda attempts: backoff.delay(max(attempts - 1, 0)),
        )  # fmt: skip
    except BaseException:
        db.close()
        raise
