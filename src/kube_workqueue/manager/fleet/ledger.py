"""`PostgresLedger`: one queue's record in PostgreSQL, shared by every manager that works it.

It is the `Ledger` port (`manager.ports`) plus claims (`ClaimsWork`, in `claims.py`): a
manager never starts an item it has not claimed, and it claims only what it has free slots for.

    start        claimed -> running, an attempt counted - only while this manager owns it
    finish, requeue, cancel
                 the outcome written and the claim let go in one statement, fenced on the
                 claim and the attempt: a manager whose claim was taken (it was declared dead)
                 writes nothing over the new owner's run; `finish` raises `ClaimLost` then,
                 so the manager counts the item lost, never a success of its own

Reads are served from memory, as the SQLite ledger's are (`state` is asked for every listed
name on every poll): `refresh()` reads the rows written by transactions that committed since
its last snapshot (`statements.CHANGES_SINCE`), so a write that took its transaction early and
committed late is read as soon as it commits. A full read every `RELOAD_SECONDS` is a safety
net only.

Invariants (all under `_writes`, the lock every write of this manager holds together with its
statement, so `settle_doubts` never races a claim or a start):
    `_state`, `_versions`, `_priorities`, `_parked` are what the database said at the last
        refresh, overlaid with this manager's own writes since (they change under `_lock`);
    `_claimed` is what this manager claimed and has not started or let go;
    `_started[name]` is the attempt of this manager's run of `name` not yet ended;
    `_lost_runs[name]` is the attempt of a run whose claim was taken while it ran (this
        manager was declared dead): nothing of it is written, and `name` is not started here
        again until that run has ended;
    `_finishing[name]` is the time of a finish whose answer was lost, written again as it was.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable

from ..faults import StorageFault
from ..lifecycle import keep_version, may_rerun
from ..ports import PENDING_PAIR, ClaimLost, State, keep_priority, pair
from . import manager_statements as managers_sql
from . import schema
from . import statements as sql
from .claims import Claims
from .database import Database
from .group_claims import GroupClaims
from .liveness import Liveness
from .notifier import Notifier
from .placed import PlacedClaims
from .queue_wide import QueueWide

log = logging.getLogger(__name__)
RELOAD_SECONDS = 600.0  # the safety net's full read (changes are read in commit order)
ANALYZE_AFTER = 1000  # new names in one listing that bring the line's statistics up to date
TAKEN = (  # the error a run's end records when its claim went to another manager meanwhile
    "its claim was taken (this manager was declared dead while it ran): this run's end is "
    "not recorded"
)


class PostgresLedger(Claims, GroupClaims, PlacedClaims, QueueWide):
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
        monotonic: Callable[[], float] = time.monotonic,
        read_only: bool = False,
    ) -> None:
        """`owner`: this manager's id (stable across its restarts: it takes back its own
        claims); `lease`: seconds its claims outlive its last heartbeat; `backoff(attempts)`:
        the wait before a failed item may be claimed again; `monotonic`: the clock its heartbeat
        judges the others by. `read_only`: a command that only reads - the schema is checked,
        never made (`schema.check`)."""
        self.db = db
        self.where = db.where
        self.owner = owner
        self.lease = lease
        self.max_attempts = max_attempts
        self.backoff = backoff
        self.clock = clock
        self._lock = threading.Lock()
        self._writes = threading.RLock()
        self._state: dict[str, tuple[str, int]] = {}
        self._versions: dict[str, str] = {}
        self._priorities: dict[str, int] = {}
        self._parked: set[str] = set()  # waiting, but left out of the line (gone from the source)
        self._claimed: set[str] = set()
        self._started: dict[str, int] = {}
        self._lost_runs: dict[str, int] = {}
        self._finishing: dict[str, float] = {}
        self._change_sets: list[set[str]] = []  # followers' sets of names changed (`changes`)
        self._in_doubt = False
        self.unregistered = False  # a claim found this manager's row gone
        self._since: str | None = None  # the snapshot of the last refresh (None: never)
        self._reloaded = 0.0
        self._settings: tuple[float, tuple] = (-1e18, (None, None, None, None, 0))
        self._others: tuple[float, int] = (-1e18, 0)  # (when read, others' running items)
        self._need_ids: dict[str, int] = {}  # a need's text -> its id (`placed`)
        # what this manager's claims met (`workqueue_claims*` metrics; `claim` counts refusals)
        self.counters = {"claims": 0, "refused": 0, "lost": 0, "expired": 0, "done": 0}
        self.on_recorded: Callable[[str], None] | None = None
        self.on_claims_lost: Callable[[list[str]], None] | None = None
        # (wanted, took) of the line that claims with each finish (`claim_with_finishes`)
        self._finish_claims: tuple[Callable[[], int], Callable[[list[str]], None]] | None = None
        self._notifier: Notifier | None = None
        self.liveness = Liveness(
            db.sibling("workqueue-heartbeat"), owner, lease, max_attempts=max_attempts,
            clock=monotonic, wall=clock,
        )  # fmt: skip
        self.liveness.on_declared_dead = self._declared_dead
        if read_only:
            schema.check(db)
        else:
            schema.migrate(db)  # (memory is read at the first `refresh`: a command never needs it)

    def join(self) -> None:
        """This manager is here: its heartbeat's row made (before it claims anything), and
        what the ledger holds read - a ledger answers `state`, `version_ran` and `priority`
        from the moment it is opened, as the SQLite and cluster ledgers do (the contract suite
        found it answering nothing until the first listing's `see`)."""
        self.liveness.register()
        self.refresh(full=True)
        self.db.is_set_up()

    # -- memory ----------------------------------------------------------------------------

    def refresh(self, *, full: bool = False) -> None:
        """Read what committed since the last refresh (everything when `full`, the first
        time, or every `RELOAD_SECONDS`). A `StorageFault` when the database does not answer."""
        now = time.monotonic()
        full = full or self._since is None or now - self._reloaded >= RELOAD_SECONDS
        if full:
            found = self.db.run(sql.EVERYTHING)
        else:
            found = self.db.run(sql.CHANGES_SINCE, since=self._since)
        with self._lock:
            if full:
                self._state, self._versions, self._priorities, self._parked = {}, {}, {}, set()
                self._reloaded = now
            for snapshot, name, state, attempts, version, priority, in_line in found:
                if snapshot is not None:
                    self._since = snapshot
                    continue
                for changed in self._change_sets:
                    changed.add(name)
                self._note(name, state, attempts, version, priority)
                if state in (State.PENDING, State.FAILED) and not in_line:
                    self._parked.add(name)
                else:
                    self._parked.discard(name)

    def changes(self) -> set[str]:
        """A set of names the ledger fills from now on with every name a refresh reads
        changed (starting with every name known now): the caller empties it as it handles
        them, under `change_lock` - so a follower reads only what changed, not every item."""
        with self._lock:
            found = set(self._state)
            self._change_sets.append(found)
        return found

    @property
    def change_lock(self) -> threading.Lock:
        return self._lock

    def _note(self, name: str, state: str, attempts: int, version, priority: int) -> None:
        self._state[name] = pair(state, attempts)
        keep_version(self._versions, name, version)
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
        """New names recorded pending (their arrival order is the order given). Names this
        manager knows cost nothing (a claimed item's, at its start); others are looked up
        after a refresh (a rival may have recorded them)."""
        names = list(dict.fromkeys(names))
        if all(n in self._state for n in names):
            return []
        self.refresh()
        fresh, needs = self.need_ids_of([n for n in names if n not in self._state])
        if not fresh:
            return []
        with self.db.session() as session:
            found = session.run(sql.SEE, now=self.clock(), names=fresh,
                                groups=[self.group_of(n) for n in fresh],
                                needs=needs)  # fmt: skip
            if found:  # the payload names who answers first (`first_to_answer`)
                session.run(sql.NOTIFY_NEW, payload=str(found[0][1]))
        with self._lock:
            for name in fresh:  # a rival's insert of the same name counts as seen too
                self._state.setdefault(name, PENDING_PAIR)
        if len(found) >= ANALYZE_AFTER:  # (`statements.ANALYZE_LINE` says why)
            try:
                self.db.run(sql.ANALYZE_LINE)
            except StorageFault as fault:  # a speed-up only: the names are recorded
                log.debug("the line's statistics were not brought up to date: %s", fault)
        return [row[0] for row in found]

    def prioritize(self, changes: dict[str, int]) -> None:
        if not changes:
            return
        self.db.count(sql.PRIORITIZE, names=list(changes), priorities=list(changes.values()))
        with self._lock:
            for name, priority in changes.items():
                keep_priority(self._priorities, name, priority)

    def start(self, name: str, log_path: str, version: str | None = None) -> int:
        with self._writes:
            if name in self._lost_runs:  # its old run here has not ended: not beside it
                self.release(name)
                raise ClaimLost("its earlier run on this manager is still ending")
            self._claimed.discard(name)
            try:
                found = self.db.run(sql.START, now=self.clock(), log_path=log_path,
                                    version=version, name=name, owner=self.owner)  # fmt: skip
            except StorageFault:
                self._in_doubt = True  # it may have started: `settle_doubts` undoes it
                raise
            if not found:
                self.counters["lost"] += 1
                raise ClaimLost("this manager's claim on it is gone")
            attempt = found[0][0]
            self._started[name] = attempt
            with self._lock:
                self._note(name, State.RUNNING.value, attempt, version, self.priority(name))
        return attempt

    def _ended(self, name: str, statement: sql.Statement, *, recheck: bool = False,
               claim: int = 0, **params) -> tuple | None:  # fmt: skip
        """One fenced write of this manager's run of `name` (its attempt), the claim let go
        with it: the row as it is now, or None (the claim was taken: counted lost, nothing
        written). `recheck`: a finish written before whose answer was lost - done when the row
        shows exactly it. A freed slot of a bounded queue, or an item back in line, is notified.
        `claim`: a finish claims up to that many items in its statement (`FINISH_AND_CLAIM`),
        told to the line (`claim_with_finishes`)."""
        with self._writes:
            if name in self._lost_runs:
                del self._lost_runs[name]
                found = None
            else:
                attempt = self._started.get(name)
                try:
                    with self.db.session() as session:
                        if claim:
                            rows = self._finish_and_claim(session, claim, name=name,
                                                          attempt=attempt, **params)  # fmt: skip
                        else:
                            rows = session.run(statement, name=name, owner=self.owner,
                                               attempt=attempt, **params)  # fmt: skip
                        if not rows and recheck:
                            rows = session.run(sql.FINISHED_ALREADY, name=name, attempt=attempt,
                                               state=params["state"], at=params["at"])  # fmt: skip
                        if rows and (statement is sql.REQUEUE
                                     or self.wanted_parallelism() is not None):  # fmt: skip
                            session.run(sql.NOTIFY_LINE)
                except StorageFault:
                    self._in_doubt = True  # written or not: `settle_doubts` and a rewrite tell
                    raise
                found = rows[0] if rows else None
                self._started.pop(name, None)
                self._finishing.pop(name, None)
        if found is None:
            self.counters["lost"] += 1
            log.debug("%s: its claim was lost: nothing of this run is written", name)
            if self.on_recorded is not None:
                self.on_recorded(name)  # the keeper may forget it: it is settled (lost)
            return None
        self._recorded(name, found)
        return found

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
        row's count) may be claimed again after its backoff. `ClaimLost` when the claim was
        taken: the outcome is not this manager's to write."""
        with self._writes:
            recheck = name in self._finishing
            when = self._finishing.setdefault(name, self.clock() if at is None else at)
            attempt = self._started.get(name) or (self.state(name) or (None, 1))[1]
            state = State.SUCCEEDED if succeeded else State.FAILED
            found = self._ended(
                name, sql.FINISH, recheck=recheck, state=state.value, at=when,
                claim=0 if recheck else self._claim_with_finish(),
                exit_code=exit_code, error=error, failed=not succeeded,
                max_attempts=self.max_attempts, backoff=self.backoff(attempt),
            )  # fmt: skip
        if found is None:
            raise ClaimLost(TAKEN)
        self.counters["done"] += 1

    def requeue(self, name: str) -> None:
        self._ended(name, sql.REQUEUE)

    def cancel(self, name: str) -> bool:
        """pending, running (by this manager) or failed -> cancelled; an item another manager
        runs or holds is that manager's to cancel. `ClaimLost` for a run of this manager
        whose claim was taken."""
        if name in self._started or name in self._lost_runs:  # a run of this manager
            if self._ended(name, sql.CANCEL_RUNNING, now=self.clock()) is None:
                raise ClaimLost(TAKEN)
            return True
        with self._writes:
            found = self.db.run(sql.CANCEL_WAITING, now=self.clock(), name=name, owner=self.owner)
            self._claimed.discard(name)
        if not found:
            return False
        self._recorded(name, found[0])
        return True

    def rerun(self, name: str, version: str | None = None) -> bool:
        """A finished item runs again (a new version, or back in the source): its outcome
        kept in `runs`, a new attempt series at the back of the line."""
        current = self.state(name)
        if not may_rerun(current):
            return False
        with self.db.transaction() as session:
            if not session.count(sql.KEEP_RUN, name=name):
                return False
            session.count(sql.RERUN, now=self.clock(), name=name)
            session.run(sql.NOTIFY_LINE)
        with self._lock:
            self._state[name] = PENDING_PAIR
        return True

    def retry(self, name: str) -> bool:
        """A failed or cancelled item runs again on purpose (`workqueue retry`): pending, its
        attempts reset; every manager's next claim may take it."""
        with self.db.session() as session:
            done = session.count(sql.RETRY, name=name) > 0
            if done:
                session.run(sql.NOTIFY_LINE)
        return done

    def take_retry_requests(self) -> list[str]:
        return []  # `workqueue retry` writes the row itself: every manager sees it at once

    def history(self, name: str) -> list[dict]:
        found = self.db.run(sql.HISTORY, name=name)
        return [{"version": v, "state": s, "attempts": a, "finished": f} for v, s, a, f in found]

    def __len__(self) -> int:
        return len(self._state)

    def report(self, status: dict) -> None:
        pass  # `workqueue status` reads the items table itself

    def note_manager(self, facts: dict | None) -> None:
        """This manager's facts where `status` reads them (None: it stopped noting)."""
        from psycopg.types.json import Jsonb

        self.db.count(managers_sql.NOTE_FACTS, owner=self.owner, lease=self.lease,
                      facts=None if facts is None else Jsonb(facts))  # fmt: skip

    def probe(self) -> None:
        """The fault hold's probe: a write (a read-only or full database refuses it), on a
        session of its own, opened for it - never one a fault may have left unusable."""
        with self.db.sibling("workqueue probe") as db:
            db.count(managers_sql.PROBE, owner=self.owner)

    def close(self) -> None:
        if self._notifier is not None:
            self._notifier.stop()
        self.liveness.db.close()
        self.db.close()
