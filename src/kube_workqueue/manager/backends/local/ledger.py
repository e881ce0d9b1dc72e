"""The local backend's ledger: the record of every item, in SQLite under the state directory.

It satisfies `manager.ports.Ledger`; beyond the port it keeps what only a local run has - the
retry requests `workqueue retry` leaves while a manager runs, and a hook (`on_recorded`) that
tells the runner when an attempt's end is committed, so the worker's keeper can forget it.

One row per item name: its state, attempts, first-seen / started / finished times (wall clock,
seconds), exit code, log path, last error (and, in ledgers of earlier versions, the process
group a running item ran in).
States are strings (rq's habit): pending -> running -> succeeded | failed, and cancelled for an
item that left the source before its work was done (`--cancel-removed`).

Durability: every transition is committed before the manager acts on it (`journal_mode=WAL`,
`synchronous=NORMAL`: a committed transition survives a crash of the manager - kill -9
included; a power loss may lose the last few, which then simply run again). So a restarted
manager carries on:
  * succeeded items never run again;
  * items that were running when it died are settled by what their workers' keepers say
    (`recovery.take_back`): a worker still running is adopted, one that ended meanwhile has
    its outcome recorded, and only one that never started (or whose end was lost with its
    keeper) runs again;
  * failed items retry until `max_attempts`, then stay failed until `retry(name)`.

The table is mirrored in memory (`_state`: name -> (state, attempts)) so that the poller's diff
against 100,000 known items is a dict lookup per name, not a query. Invariant: `_state` equals
the table's (state, attempts) columns; both change together under `_lock`.

The file itself - one manager per state directory (an exclusive lock), the checked connections,
the backups when a manager opens and closes it - is `ledger_file.py`'s; every statement it
sends is named in `statements.py`; integrity
(`integrity.py`): `open()` refuses a ledger it cannot trust - damaged, overwritten, someone
else's, or missing while the directory shows earlier runs - with one line saying what to do.
The pause, the parallelism asked for and the manager's facts are small files beside it
(`state_files.QueueFiles`).
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable, Iterable

from ...errors import UserError
from ...faults import probe
from ...lifecycle import given_back, keep_version, may_cancel, may_rerun, may_retry
from ...ports import PENDING_PAIR, Row, State, keep_priority, pair
from . import statements as sql
from .ledger_file import LEDGER_FILE, LedgerBusy, LedgerFile, storage
from .state_files import QueueFiles

__all__ = ["LedgerBusy", "SqliteLedger", "existing_ledger", "open_ledger"]  # LedgerBusy: open()'s

COLUMNS = (
    "name, state, attempts, first_seen, started, finished, exit_code, log_path, last_error, version"
)
# a ledger of an earlier version, read by `status` without writing (no column added): 0
PRIORITY = ", priority"
NO_PRIORITY = ", 0 AS priority"


class SqliteLedger(LedgerFile, QueueFiles):
    arrivals_known = True  # first_seen is when the manager first saw the item listed
    keeps_status = False  # `workqueue status` reads the ledger itself (`state_files.report`)

    def __init__(self, state_dir: str, *, clock: Callable[[], float] = time.time,
                 mirrored: bool = True) -> None:  # fmt: skip
        """`mirrored=False`: nothing is read into memory at open - for `status`, which reads
        rows and asks no item's state (100,000 items: 0.13 s saved)."""
        super().__init__(state_dir)
        self.where = self.state_dir
        self.clock = clock
        self.mirrored = mirrored
        self._state: dict[str, tuple[str, int]] = {}
        self._versions: dict[str, str] = {}  # name -> the version its latest attempt ran at
        # name -> priority, for the items whose priority is not 0 (the `priority` column's
        # non-zero values: both change together under `_lock`)
        self._priorities: dict[str, int] = {}
        self._columns = COLUMNS + PRIORITY
        # told each name whose attempt's end is committed (finish, requeue, cancel): the local
        # backend's keeper may then forget it
        self.on_recorded: Callable[[str], None] | None = None

    def _mirror(self, db: sqlite3.Connection) -> None:
        """The items' (state, attempts) and versions read into memory (the invariant above)."""
        self._state = {}
        self._versions = {}
        self._priorities = {}
        known = {row[1] for row in db.execute(sql.COLUMNS_OF_ITEMS.sql)}
        self._columns = COLUMNS + (PRIORITY if "priority" in known else NO_PRIORITY)
        if not self.mirrored:
            return
        if "priority" in known:
            for name, priority in db.execute(sql.MIRROR_PRIORITIES.sql):
                self._priorities[name] = priority
        for name, state, attempts, version in db.execute(sql.MIRROR_STATES.sql):
            self._state[name] = pair(state, attempts)
            if version is not None:
                self._versions[name] = version

    # -- reads -----------------------------------------------------------------------------

    def state(self, name: str) -> tuple[str, int] | None:
        """(state, attempts) of a known item, or None. A dict lookup: cheap on every poll."""
        return self._state.get(name)

    def __len__(self) -> int:
        return len(self._state)

    @storage
    def row(self, name: str) -> Row | None:
        with self._lock:
            query = sql.ROW.sql.format(columns=self._columns)
            found = self._db.execute(query, (name,)).fetchone()
        return Row(*found) if found else None

    def rows(self, state: str | None = None) -> list[Row]:
        """Every item, or those in `state`, by name."""
        if state is None:
            return self.query()
        return self.query("state=?", (str(state),))

    @storage
    def query(
        self, where: str = "", params: Iterable = (), order: str = "name", limit: int | None = None
    ) -> list[Row]:
        """Rows matching an SQL condition on the items table (for `workqueue status`)."""
        text = sql.ROWS.sql.format(columns=self._columns)
        if where:
            text += f" WHERE {where}"
        text += f" ORDER BY {order}"
        if limit is not None:
            text += f" LIMIT {int(limit)}"
        with self._lock:
            if self._db is None:  # closed: the manager is stopping
                return []
            return [Row(*r) for r in self._db.execute(text, tuple(params))]

    def counts(self) -> dict[str, int]:
        out = {s.value: 0 for s in State}
        for state, _ in list(self._state.values()):
            out[state] = out.get(state, 0) + 1
        return out

    # -- transitions -----------------------------------------------------------------------

    @storage
    def see(self, names: Iterable[str]) -> list[str]:
        """Record names not seen before as pending (first_seen = now). Returns the new ones."""
        new = [n for n in names if n not in self._state]
        if not new:
            return []
        now = self.clock()
        with self._lock:
            new = [n for n in dict.fromkeys(new) if n not in self._state]
            with self._db:
                self._db.execute("BEGIN")
                self._db.executemany(sql.SEE.sql, [(n, now) for n in new])
            for n in new:
                self._state[n] = PENDING_PAIR
        return new

    def priority(self, name: str) -> int:
        """The priority last recorded for `name` (0 when none was). A dict lookup."""
        return self._priorities.get(name, 0)

    @storage
    def prioritize(self, changes: dict[str, int]) -> None:
        """Record the priorities of known items (`changes`: name -> priority), so that `status`
        in another process orders the line as this manager does."""
        if not changes:
            return
        with self._lock:
            with self._db:
                self._db.execute("BEGIN")
                self._db.executemany(sql.PRIORITIZE.sql, [(p, n) for n, p in changes.items()])
            for name, priority in changes.items():
                keep_priority(self._priorities, name, priority)

    @storage
    def start(self, name: str, log_path: str, version: str | None = None) -> int:
        """pending/failed -> running; counts an attempt and notes the item's version. Returns
        the attempt number."""
        now = self.clock()
        with self._lock:
            _, attempts = self._state.get(name, (State.PENDING.value, 0))
            attempts += 1
            self._db.execute(sql.START.sql, (attempts, now, log_path, version, name))
            self._state[name] = pair(State.RUNNING.value, attempts)
            keep_version(self._versions, name, version)
            return attempts

    def version_ran(self, name: str) -> str | None:
        """The version the item's latest attempt ran at (None: unknown). A dict lookup."""
        return self._versions.get(name)

    @storage
    def rerun(self, name: str, version: str | None = None) -> bool:
        """A finished item whose source changed (or, cancelled, came back) runs again: its
        outcome goes to the history (`runs`), and it is pending with a new attempt series.
        False unless it had finished."""
        with self._lock:
            current = self._state.get(name)
            if not may_rerun(current):
                return False
            with self._db:
                self._db.execute("BEGIN")
                self._db.execute(sql.KEEP_RUN.sql, (name,))
                self._db.execute(sql.RERUN.sql, (self.clock(), name))
            self._state[name] = PENDING_PAIR
            return True

    @storage
    def history(self, name: str) -> list[dict]:
        """The item's earlier runs, oldest first: version, state, attempts, finished."""
        with self._lock:
            found = self._db.execute(sql.HISTORY.sql, (name,)).fetchall()
        return [{"version": v, "state": st, "attempts": a, "finished": f} for v, st, a, f in found]

    @storage
    def finish(
        self,
        name: str,
        succeeded: bool,
        exit_code: int | None,
        error: str | None,
        *,
        at: float | None = None,
    ) -> None:
        """running -> succeeded | failed; `at`: when it ended, if not now (a worker that ended
        while no manager ran)."""
        state = State.SUCCEEDED if succeeded else State.FAILED
        with self._lock:
            _, attempts = self._state[name]
            ended = self.clock() if at is None else at
            self._db.execute(sql.FINISH.sql, (state.value, ended, exit_code, error, name))
            self._state[name] = pair(state.value, attempts)
        self._recorded(name)

    def _recorded(self, name: str) -> None:
        if self.on_recorded is not None:
            self.on_recorded(name)

    @storage
    def requeue(self, name: str) -> None:
        """running -> pending without counting the attempt (the manager stopped it)."""
        with self._lock:
            _, attempts = self._state[name]
            attempts = given_back(attempts)
            self._db.execute(sql.REQUEUE.sql, (attempts, name))
            self._state[name] = pair(State.PENDING.value, attempts)
        self._recorded(name)

    @storage
    def cancel(self, name: str) -> bool:
        """pending, running or failed -> cancelled: the item left the source. Its attempts and
        last outcome stay as they were; `finished` is the moment of the cancel."""
        with self._lock:
            current = self._state.get(name)
            if not may_cancel(current):
                return False
            self._db.execute(sql.CANCEL.sql, (self.clock(), name))
            self._state[name] = pair(State.CANCELLED.value, current[1])
        self._recorded(name)
        return True

    @storage
    def retry(self, name: str) -> bool:
        """A failed or cancelled item runs again on purpose: back to pending with its attempts
        reset."""
        with self._lock:
            current = self._state.get(name)
            if not may_retry(current):
                return False
            self._db.execute(sql.RETRY.sql, (name,))
            self._state[name] = PENDING_PAIR
            return True

    def gave_up(self, name: str) -> bool:
        """Local failures are retried up to --max-attempts: none is final by itself."""
        return False

    @storage
    def request_retry(self, name: str) -> None:
        """Ask the manager that holds this state directory to retry `name` (see
        `take_retry_requests`); used by `workqueue retry` while a manager runs."""
        with self._lock:
            self._db.execute(sql.REQUEST_RETRY.sql, (name,))

    @storage
    def take_retry_requests(self) -> list[str]:
        """Apply and clear pending retry requests; returns the names now pending again."""
        with self._lock:
            names = [r[0] for r in self._db.execute(sql.RETRY_REQUESTS.sql)]
            if names:
                self._db.execute(sql.CLEAR_RETRY_REQUESTS.sql)
        return [n for n in names if self.retry(n)]

    @storage
    def probe(self) -> None:
        """Whether the state directory takes writes again after a `StorageFault`: new data in
        a scratch file, then a committed transaction; raises the fault while it does not."""
        probe(self.state_dir)
        with self._lock:
            self._db.execute(sql.PROBE.sql, (self.clock(),))

    @storage
    def running_rows(self) -> list[tuple[str, int, int | None, str | None]]:
        """(name, attempts, pgid, pgid start) of every item marked running: what a manager that
        died left (`recovery.take_back` settles each; pgid only in ledgers of earlier
        versions)."""
        with self._lock:
            return self._db.execute(sql.RUNNING_ROWS.sql).fetchall()


def open_ledger(
    state_dir: str, *, exclusive: bool = True, backups: bool | None = None, mirrored: bool = True
) -> SqliteLedger:
    """The ledger of `state_dir`, opened; a held or unusable directory is a `UserError`."""
    try:
        return SqliteLedger(state_dir, mirrored=mirrored).open(exclusive=exclusive,
                                                              backups=backups)  # fmt: skip
    except OSError as exc:
        raise UserError(f"cannot use state directory {state_dir}: {exc.strerror}") from None


def existing_ledger(state_dir: str, *, exclusive: bool = False,
                    mirrored: bool = True) -> SqliteLedger:  # fmt: skip
    """For commands that read or change what a manager left (never backed up by them): a
    clear error when nothing is there. `mirrored=False`: rows only (`SqliteLedger`)."""
    if not os.path.exists(os.path.join(state_dir, LEDGER_FILE)):
        raise UserError(f"no ledger in {state_dir} (has a manager run there?)")
    return open_ledger(state_dir, exclusive=exclusive, backups=False, mirrored=mirrored)
