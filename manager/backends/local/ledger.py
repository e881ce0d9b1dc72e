"""The local backend's ledger: the record of every item, in SQLite under the state directory.

It satisfies `manager.ports.Ledger`; beyond the port it keeps what only a local run has - the
process group each running item runs in, and the retry requests `workqueue retry` leaves while
a manager runs.

One row per item name: its state, attempts, first-seen / started / finished times (wall clock,
seconds), exit code, log path, last error, and - while it runs - the process group it runs in.
States are strings (rq's habit): pending -> running -> succeeded | failed, and cancelled for an
item that left the source before its work was done (`--cancel-removed`).

Durability: every transition is committed before the manager acts on it (`journal_mode=WAL`,
`synchronous=NORMAL`: a committed transition survives a crash of the manager - kill -9
included; a power loss may lose the last few, which then simply run again). So a restarted
manager carries on:
  * succeeded items never run again;
  * items that were running when it died run again (`recover()` turns them back to pending,
    after ending any process group they left behind);
  * failed items retry until `max_attempts`, then stay failed until `retry(name)`.

The table is mirrored in memory (`_state`: name -> (state, attempts)) so that the poller's diff
against 100,000 known items is a dict lookup per name, not a query. Invariant: `_state` equals
the table's (state, attempts) columns; both change together under `_lock`.

One manager per state directory: `open()` takes an exclusive lock on a file there, and a second
manager on the same directory gets a clear error instead of running items twice.

Integrity (`integrity.py`): `open()` refuses a ledger it cannot trust - damaged, overwritten,
someone else's, or missing while the directory shows earlier runs - with one line saying what
to do; a manager's ledger is backed up when it opens and when it closes.
"""

from __future__ import annotations

import fcntl
import functools
import os
import sqlite3
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable

from ...errors import UserError
from ...faults import READ_ONLY, StorageFault, classify, probe, raised_as_faults
from ...ports import FINISHED, Row, State
from . import integrity
from .state_files import read_parallelism, read_paused, write_facts, write_parallelism

LEDGER_FILE = "ledger.sqlite3"


def _add_version_column(db: sqlite3.Connection) -> None:
    columns = {row[1] for row in db.execute("PRAGMA table_info(items)")}
    if columns and "version" not in columns:
        db.execute("ALTER TABLE items ADD COLUMN version TEXT")


class LedgerBusy(UserError):
    """Another manager holds this state directory."""


def _storage(method):
    """A ledger method whose failures of the machine (a full disk, a read-only file system, an
    I/O error: `manager.faults`) are raised as one `StorageFault`. The method's in-memory
    mirror changes only after its statement succeeded, so a fault leaves both unchanged."""

    @functools.wraps(method)
    def guarded(self, *args, **kwargs):
        with raised_as_faults(self.state_dir):
            return method(self, *args, **kwargs)

    return guarded


# No index on state: every transition would update it (a third of a transition's cost), and
# what asks by state - recovery at start, `status`, `retry --failed` - reads all rows anyway.
SCHEMA = """
CREATE TABLE IF NOT EXISTS items (
    name        TEXT PRIMARY KEY,
    state       TEXT NOT NULL,
    attempts    INTEGER NOT NULL DEFAULT 0,
    first_seen  REAL NOT NULL,
    started     REAL,
    finished    REAL,
    exit_code   INTEGER,
    log_path    TEXT,
    last_error  TEXT,
    pgid        INTEGER,
    pgid_start  TEXT,
    version     TEXT
);
DROP INDEX IF EXISTS items_by_state;
CREATE TABLE IF NOT EXISTS retry_requests (name TEXT PRIMARY KEY);
CREATE TABLE IF NOT EXISTS runs (
    name        TEXT NOT NULL,
    version     TEXT,
    state       TEXT NOT NULL,
    attempts    INTEGER NOT NULL,
    started     REAL,
    finished    REAL,
    exit_code   INTEGER,
    last_error  TEXT
);
CREATE INDEX IF NOT EXISTS runs_by_name ON runs(name);
CREATE TABLE IF NOT EXISTS health (what TEXT PRIMARY KEY, at REAL);
"""


COLUMNS = (
    "name, state, attempts, first_seen, started, finished, exit_code, log_path, last_error, version"
)


class SqliteLedger:
    arrivals_known = True  # first_seen is when the manager first saw the item listed

    def __init__(self, state_dir: str, *, clock: Callable[[], float] = time.time) -> None:
        self.state_dir = os.path.abspath(state_dir)
        self.where = self.state_dir
        self.clock = clock
        self._lock = threading.Lock()
        self._state: dict[str, tuple[str, int]] = {}
        self._versions: dict[str, str] = {}  # name -> the version its latest attempt ran at
        self._db: sqlite3.Connection | None = None
        self._lock_file = None
        self._exclusive = False
        self._backups = False
        self._paused: float | None = None
        self._paused_read = float("-inf")
        self._wanted: int | None = None  # `workqueue scale`, as last read
        self._wanted_read = float("-inf")

    @property
    def path(self) -> str:
        return os.path.join(self.state_dir, LEDGER_FILE)

    # -- lifecycle -------------------------------------------------------------------------

    @_storage
    def lock(self) -> None:
        """Hold the state directory (one manager at a time); `LedgerBusy` when another does."""
        os.makedirs(self.state_dir, exist_ok=True)
        self._lock_file = open(os.path.join(self.state_dir, "manager.lock"), "w")  # noqa: SIM115
        try:
            fcntl.flock(self._lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock_file.close()
            self._lock_file = None
            raise LedgerBusy(
                f"another manager is using the state directory {self.state_dir}"
            ) from None

    def open(self, *, exclusive: bool = True, backups: bool | None = None) -> SqliteLedger:
        """Open (and check) the ledger; `exclusive` holds the state directory too, as a
        manager must. `backups` (default: `exclusive`) takes one when it opens and one when it
        closes - a manager's; a command that changes one item takes none, so a few of them
        never push out the backup a manager took. The caller's duty: `close()`."""
        self._backups = exclusive if backups is None else backups
        if exclusive:
            self.lock()
        elif not os.access(self.state_dir, os.W_OK) and os.path.isdir(self.state_dir):
            # Only reading (`status`, `ledger check`) a folder this process cannot write: a
            # read-only mount, a disk the kernel turned read-only, someone else's folder.
            self._db = self._connect_read_only()
            return self
        else:
            self._make_state_dir()
        try:
            self._db = self._connect(stamp=exclusive)
            if self._backups and self._state:
                self._backup_now()
        except BaseException:
            if self._db is not None:
                self._db.close()
                self._db = None
            self._release_lock()
            raise
        self._exclusive = exclusive
        return self

    @_storage
    def _make_state_dir(self) -> None:
        os.makedirs(self.state_dir, exist_ok=True)

    @_storage
    def _backup_now(self) -> str:
        return integrity.backup(self._db, self.state_dir)

    def _connect_read_only(self) -> sqlite3.Connection:
        """A connection that never writes (nor makes the journal's side files): SQLite's
        read-only mode, or - when the ledger was closed cleanly, so no write-ahead log holds
        anything the file lacks - the file read as immutable."""
        integrity.check_file(self.path, self.state_dir)
        uri = "file:" + urllib.parse.quote(self.path)
        wal = os.path.exists(self.path + "-wal")
        for mode in ("?mode=ro",) + (() if wal else ("?mode=ro&immutable=1",)):
            db = sqlite3.connect(uri + mode, uri=True, check_same_thread=False)
            try:
                integrity.check_database(db, self.path, self.state_dir, stamp=False)
                self._mirror(db)
                return db
            except StorageFault:
                db.close()
        raise StorageFault(READ_ONLY, self.state_dir, "the ledger's journal cannot be read")

    def _mirror(self, db: sqlite3.Connection) -> None:
        """The items' (state, attempts) and versions read into memory (the invariant above)."""
        self._state = {}
        self._versions = {}
        for name, state, attempts, version in db.execute(
            "SELECT name, state, attempts, version FROM items"
        ):
            self._state[name] = (state, attempts)
            if version is not None:
                self._versions[name] = version

    def _connect(self, *, stamp: bool) -> sqlite3.Connection:
        """The checked connection (see `integrity.py`), with the items mirrored in memory."""
        integrity.check_file(self.path, self.state_dir)
        db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            integrity.check_database(db, self.path, self.state_dir, stamp=stamp)
            _add_version_column(db)  # a schema-1 ledger: items had no version yet
            db.executescript(SCHEMA)
            self._mirror(db)
        except sqlite3.DatabaseError as exc:
            db.close()
            raise classify(exc, self.state_dir) or integrity.damaged(
                self.path, self.state_dir, exc
            ) from None
        except BaseException:
            db.close()
            raise
        return db

    def durability(self) -> tuple[str, int]:
        """(journal_mode, synchronous) in force: ("wal", 1) - NORMAL - as documented above."""
        with self._lock:
            mode = self._db.execute("PRAGMA journal_mode").fetchone()[0]
            sync = self._db.execute("PRAGMA synchronous").fetchone()[0]
        return mode, sync

    @_storage
    def backup(self) -> str:
        """A consistent copy into the state directory's backups (see `integrity.backup`)."""
        with self._lock:
            return integrity.backup(self._db, self.state_dir)

    def close(self) -> None:
        if self._db is not None:
            if self._backups and self._state:
                try:
                    self.backup()
                except (OSError, sqlite3.Error, StorageFault):
                    pass  # the ledger itself is committed; a backup is a courtesy
            with self._lock:  # never under a query of another thread (the status report's):
                self._db.close()  # closing a connection in use crashes the interpreter
                self._db = None
        self._release_lock()

    def unlock(self) -> None:
        self._release_lock()

    def _release_lock(self) -> None:
        if self._lock_file is not None:
            self._lock_file.close()
            self._lock_file = None

    def __enter__(self) -> SqliteLedger:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- reads -----------------------------------------------------------------------------

    def state(self, name: str) -> tuple[str, int] | None:
        """(state, attempts) of a known item, or None. A dict lookup: cheap on every poll."""
        return self._state.get(name)

    def __len__(self) -> int:
        return len(self._state)

    @_storage
    def row(self, name: str) -> Row | None:
        with self._lock:
            query = f"SELECT {COLUMNS} FROM items WHERE name=?"
            found = self._db.execute(query, (name,)).fetchone()
        return Row(*found) if found else None

    def rows(self, state: str | None = None) -> list[Row]:
        """Every item, or those in `state`, by name."""
        if state is None:
            return self.query()
        return self.query("state=?", (str(state),))

    @_storage
    def query(
        self, where: str = "", params: Iterable = (), order: str = "name", limit: int | None = None
    ) -> list[Row]:
        """Rows matching an SQL condition on the items table (for `workqueue status`)."""
        sql = f"SELECT {COLUMNS} FROM items"
        if where:
            sql += f" WHERE {where}"
        sql += f" ORDER BY {order}"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        with self._lock:
            if self._db is None:  # closed: the manager is stopping
                return []
            return [Row(*r) for r in self._db.execute(sql, tuple(params))]

    def counts(self) -> dict[str, int]:
        out = {s.value: 0 for s in State}
        for state, _ in list(self._state.values()):
            out[state] = out.get(state, 0) + 1
        return out

    # -- transitions -----------------------------------------------------------------------

    @_storage
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
                self._db.executemany(
                    "INSERT OR IGNORE INTO items(name, state, attempts, first_seen) "
                    "VALUES (?, 'pending', 0, ?)",
                    [(n, now) for n in new],
                )
            for n in new:
                self._state[n] = (State.PENDING.value, 0)
        return new

    @_storage
    def start(self, name: str, log_path: str, version: str | None = None) -> int:
        """pending/failed -> running; counts an attempt and notes the item's version. Returns
        the attempt number."""
        now = self.clock()
        with self._lock:
            _, attempts = self._state.get(name, (State.PENDING.value, 0))
            attempts += 1
            self._db.execute(
                "UPDATE items SET state='running', attempts=?, started=?, finished=NULL, "
                "exit_code=NULL, log_path=?, pgid=NULL, pgid_start=NULL, version=? WHERE name=?",
                (attempts, now, log_path, version, name),
            )
            self._state[name] = (State.RUNNING.value, attempts)
            if version is not None:
                self._versions[name] = version
            else:
                self._versions.pop(name, None)
            return attempts

    def version_ran(self, name: str) -> str | None:
        """The version the item's latest attempt ran at (None: unknown). A dict lookup."""
        return self._versions.get(name)

    @_storage
    def rerun(self, name: str, version: str | None = None) -> bool:
        """A finished item whose source changed (or, cancelled, came back) runs again: its
        outcome goes to the history (`runs`), and it is pending with a new attempt series.
        False unless it had finished."""
        with self._lock:
            current = self._state.get(name)
            if current is None or current[0] not in FINISHED:
                return False
            with self._db:
                self._db.execute("BEGIN")
                self._db.execute(
                    "INSERT INTO runs(name, version, state, attempts, started, finished, "
                    "exit_code, last_error) SELECT name, version, state, attempts, started, "
                    "finished, exit_code, last_error FROM items WHERE name=?",
                    (name,),
                )
                self._db.execute(
                    "UPDATE items SET state='pending', attempts=0, first_seen=?, started=NULL, "
                    "finished=NULL, exit_code=NULL, last_error=NULL WHERE name=?",
                    (self.clock(), name),
                )
            self._state[name] = (State.PENDING.value, 0)
            return True

    @_storage
    def history(self, name: str) -> list[dict]:
        """The item's earlier runs, oldest first: version, state, attempts, finished."""
        with self._lock:
            found = self._db.execute(
                "SELECT version, state, attempts, finished FROM runs WHERE name=? ORDER BY rowid",
                (name,),
            ).fetchall()
        return [{"version": v, "state": st, "attempts": a, "finished": f} for v, st, a, f in found]

    @_storage
    def record_process(self, name: str, pgid: int, pgid_start: str | None) -> None:
        """The running item's process group, so a restart can end it if the manager died."""
        with self._lock:
            self._db.execute(
                "UPDATE items SET pgid=?, pgid_start=? WHERE name=?", (pgid, pgid_start, name)
            )

    @_storage
    def finish(self, name: str, succeeded: bool, exit_code: int | None, error: str | None) -> None:
        """running -> succeeded | failed."""
        state = State.SUCCEEDED if succeeded else State.FAILED
        with self._lock:
            _, attempts = self._state[name]
            self._db.execute(
                "UPDATE items SET state=?, finished=?, exit_code=?, last_error=?, pgid=NULL, "
                "pgid_start=NULL WHERE name=?",
                (state.value, self.clock(), exit_code, error, name),
            )
            self._state[name] = (state.value, attempts)

    @_storage
    def requeue(self, name: str) -> None:
        """running -> pending without counting the attempt (the manager stopped it)."""
        with self._lock:
            _, attempts = self._state[name]
            attempts = max(0, attempts - 1)
            self._db.execute(
                "UPDATE items SET state='pending', attempts=?, started=NULL, pgid=NULL, "
                "pgid_start=NULL WHERE name=?",
                (attempts, name),
            )
            self._state[name] = (State.PENDING.value, attempts)

    @_storage
    def cancel(self, name: str) -> bool:
        """pending, running or failed -> cancelled: the item left the source. Its attempts and
        last outcome stay as they were; `finished` is the moment of the cancel."""
        with self._lock:
            current = self._state.get(name)
            if current is None or current[0] in (State.SUCCEEDED.value, State.CANCELLED.value):
                return False
            self._db.execute(
                "UPDATE items SET state='cancelled', finished=?, pgid=NULL, pgid_start=NULL "
                "WHERE name=?",
                (self.clock(), name),
            )
            self._state[name] = (State.CANCELLED.value, current[1])
            return True

    @_storage
    def retry(self, name: str) -> bool:
        """A failed or cancelled item runs again on purpose: back to pending with its attempts
        reset."""
        with self._lock:
            current = self._state.get(name)
            if current is None or current[0] not in (State.FAILED.value, State.CANCELLED.value):
                return False
            self._db.execute(
                "UPDATE items SET state='pending', attempts=0, last_error=NULL WHERE name=?",
                (name,),
            )
            self._state[name] = (State.PENDING.value, 0)
            return True

    def paused_since(self) -> float | None:
        """From the `paused` file beside the ledger (`workqueue pause`), read at most twice a
        second."""
        now = time.monotonic()
        if now - self._paused_read < 0.5:
            return self._paused
        self._paused = read_paused(self.state_dir)
        self._paused_read = now
        return self._paused

    def wanted_parallelism(self) -> int | None:
        """From the `parallelism` file beside the ledger (`workqueue scale`), read at most
        twice a second."""
        now = time.monotonic()
        if now - self._wanted_read >= 0.5:
            self._wanted, self._wanted_read = read_parallelism(self.state_dir), now
        return self._wanted

    def want_parallelism(self, parallelism: int) -> None:
        write_parallelism(self.state_dir, parallelism)
        self._wanted, self._wanted_read = parallelism, time.monotonic()

    def report(self, status: dict) -> None:
        """Nothing to write: `workqueue status` reads the ledger itself."""

    def gave_up(self, name: str) -> bool:
        """Local failures are retried up to --max-attempts: none is final by itself."""
        return False

    @_storage
    def request_retry(self, name: str) -> None:
        """Ask the manager that holds this state directory to retry `name` (see
        `take_retry_requests`); used by `workqueue retry` while a manager runs."""
        with self._lock:
            self._db.execute("INSERT OR IGNORE INTO retry_requests(name) VALUES (?)", (name,))

    @_storage
    def take_retry_requests(self) -> list[str]:
        """Apply and clear pending retry requests; returns the names now pending again."""
        with self._lock:
            names = [r[0] for r in self._db.execute("SELECT name FROM retry_requests")]
            if names:
                self._db.execute("DELETE FROM retry_requests")
        return [n for n in names if self.retry(n)]

    @_storage
    def note_manager(self, facts: dict | None) -> None:
        """`manager.json` beside the ledger: written whole (a temporary file renamed over it),
        removed when the manager stops. Readers check the pid in it is alive."""
        write_facts(self.state_dir, facts)

    @_storage
    def probe(self) -> None:
        """Whether the state directory takes writes again after a `StorageFault`: new data in
        a scratch file, then a committed transaction; raises the fault while it does not."""
        probe(self.state_dir)
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO health(what, at) VALUES ('probe', ?)", (self.clock(),)
            )

    @_storage
    def recover(self, end_process_group: Callable[[int, str | None], None]) -> list[str]:
        """At start: items left running by a manager that died go back to pending, after
        `end_process_group(pgid, start)` ended whatever they were still running."""
        with self._lock:
            left = self._db.execute(
                "SELECT name, pgid, pgid_start FROM items WHERE state='running'"
            ).fetchall()
        for name, pgid, start in left:
            if pgid:
                end_process_group(pgid, start)
            self.requeue(name)
        return [name for name, _, _ in left]


def open_ledger(
    state_dir: str, *, exclusive: bool = True, backups: bool | None = None
) -> SqliteLedger:
    """The ledger of `state_dir`, opened; a held or unusable directory is a `UserError`."""
    try:
        return SqliteLedger(state_dir).open(exclusive=exclusive, backups=backups)
    except OSError as exc:
        raise UserError(f"cannot use state directory {state_dir}: {exc.strerror}") from None


def existing_ledger(state_dir: str, *, exclusive: bool = False) -> SqliteLedger:
    """For commands that read or change what a manager left (never backed up by them): a
    clear error when nothing is there."""
    if not os.path.exists(os.path.join(state_dir, LEDGER_FILE)):
        raise UserError(f"no ledger in {state_dir} (has a manager run there?)")
    return open_ledger(state_dir, exclusive=exclusive, backups=False)
