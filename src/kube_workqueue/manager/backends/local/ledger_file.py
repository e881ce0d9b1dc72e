"""The local ledger's file: its schema, its checked connections, and the state directory's lock.

`SqliteLedger` (ledger.py) keeps the items; this module opens what it keeps them in:

  * `connect` - the read-write connection: the file checked first (`integrity.py`: damaged,
    overwritten, someone else's), then `journal_mode=WAL` and `synchronous=NORMAL` (the
    durability ledger.py documents), the schema brought up to date in place (a ledger of an
    earlier version gains `items.version` and `items.priority`; new tables are created), and
    the caller's `mirror(db)` run on it;
  * `connect_read_only` - for commands that only read a folder this process cannot write (a
    read-only mount, a disk the kernel turned read-only, someone else's): SQLite's read-only
    mode, or - when no write-ahead log holds anything the file lacks - the file read as
    immutable, which makes no side files at all;
  * `lock_state_dir` - an exclusive, non-blocking `flock` on `manager.lock`: one manager per
    state directory, and a second one gets `LedgerBusy` (a one-line error) instead of running
    items twice. The lock lives as long as the returned file stays open.

`LedgerFile` holds them for `SqliteLedger`: open (checked, locked when a manager's, backed up
when it holds items), close (backed up again, then closed under the lock its queries hold:
closing a connection another thread is querying crashes the interpreter), and `storage`, the
guard that turns a machine's refusal inside a ledger method into one `StorageFault`.

Every connection allows use from other threads (`check_same_thread=False`): its queries are
serialised under `LedgerFile._lock`.
"""

from __future__ import annotations

import fcntl
import functools
import os
import sqlite3
import threading
import urllib.parse
from collections.abc import Callable

from ...errors import UserError
from ...faults import READ_ONLY, StorageFault
from . import integrity
from .sqlite_faults import classify, raised_as_faults

LEDGER_FILE = "ledger.sqlite3"
LOCK_FILE = "manager.lock"

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
    version     TEXT,
    priority    INTEGER NOT NULL DEFAULT 0
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


class LedgerBusy(UserError):
    """Another manager holds this state directory."""


def lock_state_dir(state_dir: str):
    """The open lock file of `state_dir`, held exclusively (see the module docstring); the
    caller closes it to let go. `LedgerBusy` when another manager holds it; a `UserError`
    when `state_dir` cannot be a folder (a file by that name, no permission)."""
    if os.path.exists(state_dir) and not os.path.isdir(state_dir):
        raise UserError(f"--state-dir {state_dir} is a file, not a folder")
    try:
        os.makedirs(state_dir, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot make the state directory {state_dir}: {exc.strerror}") from None
    lock_file = open(os.path.join(state_dir, LOCK_FILE), "w")  # noqa: SIM115 - held open
    try:
        fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock_file.close()
        raise LedgerBusy(f"another manager is using the state directory {state_dir}") from None
    return lock_file


def connect(
    path: str, state_dir: str, *, stamp: bool, mirror: Callable[[sqlite3.Connection], None]
) -> sqlite3.Connection:
    """The checked read-write connection to the ledger at `path` (see the module docstring);
    `stamp` marks the file as this application's (a manager's first open). A damaged file is
    a `UserError` saying what to do, a machine's refusal a `StorageFault`."""
    integrity.check_file(path, state_dir)
    db = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=30)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        integrity.check_database(db, path, state_dir, stamp=stamp)
        _add_columns(db)  # a ledger of an earlier version: items had no version, no priority
        db.executescript(SCHEMA)
        mirror(db)
    except sqlite3.DatabaseError as exc:
        db.close()
        raise classify(exc, state_dir) or integrity.damaged(path, state_dir, exc) from None
    except BaseException:
        db.close()
        raise
    return db


def connect_read_only(
    path: str, state_dir: str, mirror: Callable[[sqlite3.Connection], None]
) -> sqlite3.Connection:
    """A connection to the ledger at `path` that never writes (see the module docstring),
    with `mirror(db)` run on it; a `StorageFault` when neither mode can read it."""
    integrity.check_file(path, state_dir)
    uri = "file:" + urllib.parse.quote(path)
    wal = os.path.exists(path + "-wal")
    for mode in ("?mode=ro",) + (() if wal else ("?mode=ro&immutable=1",)):
        db = sqlite3.connect(uri + mode, uri=True, check_same_thread=False)
        try:
            integrity.check_database(db, path, state_dir, stamp=False)
            mirror(db)
            return db
        except StorageFault:
            db.close()
    raise StorageFault(READ_ONLY, state_dir, "the ledger's journal cannot be read")


def _add_columns(db: sqlite3.Connection) -> None:
    columns = {row[1] for row in db.execute("PRAGMA table_info(items)")}
    if columns and "version" not in columns:
        db.execute("ALTER TABLE items ADD COLUMN version TEXT")
    if columns and "priority" not in columns:
        db.execute("ALTER TABLE items ADD COLUMN priority INTEGER NOT NULL DEFAULT 0")


def storage(method):
    """A ledger method whose failures of the machine (a full disk, a read-only file system, an
    I/O error: `manager.faults`) are raised as one `StorageFault`. The method's in-memory
    mirror changes only after its statement succeeded, so a fault leaves both unchanged."""

    @functools.wraps(method)
    def guarded(self, *args, **kwargs):
        with raised_as_faults(self.state_dir):
            return method(self, *args, **kwargs)

    return guarded


class LedgerFile:
    """The ledger's file held open (see the module docstring). Subclass duties: `_mirror(db)`
    reads what it keeps in memory, on every connection before it is used; `len(self)` is how
    many items it holds (none: no backup is worth taking); every query is made under `_lock`
    and with `_db` not None (None: closed)."""

    def __init__(self, state_dir: str) -> None:
        self.state_dir = os.path.abspath(state_dir)
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self._lock_file = None
        self._backups = False

    def _mirror(self, db: sqlite3.Connection) -> None:
        raise NotImplementedError

    def __len__(self) -> int:
        raise NotImplementedError

    @property
    def path(self) -> str:
        return os.path.join(self.state_dir, LEDGER_FILE)

    @storage
    def lock(self) -> None:
        """Hold the state directory (one manager at a time); `LedgerBusy` when another does."""
        self._lock_file = lock_state_dir(self.state_dir)

    def open(self, *, exclusive: bool = True, backups: bool | None = None):
        """Open (and check) the ledger; returns self. `exclusive` holds the state directory
        too, as a manager must. `backups` (default: `exclusive`) takes one when it opens and
        one when it closes - a manager's; a command that changes one item takes none, so a few
        of them never push out the backup a manager took. The caller's duty: `close()`."""
        self._backups = exclusive if backups is None else backups
        if exclusive:
            self.lock()
        elif not os.access(self.state_dir, os.W_OK) and os.path.isdir(self.state_dir):
            # Only reading (`status`, `ledger check`) a folder this process cannot write: a
            # read-only mount, a disk the kernel turned read-only, someone else's folder.
            self._db = connect_read_only(self.path, self.state_dir, self._mirror)
            return self
        else:
            self._make_state_dir()
        try:
            self._db = connect(self.path, self.state_dir, stamp=exclusive, mirror=self._mirror)
            if self._backups and len(self):
                self._backup_now()
        except BaseException:
            if self._db is not None:
                self._db.close()
                self._db = None
            self._release_lock()
            raise
        return self

    @storage
    def _make_state_dir(self) -> None:
        os.makedirs(self.state_dir, exist_ok=True)

    @storage
    def _backup_now(self) -> str:
        return integrity.backup(self._db, self.state_dir)

    def durability(self) -> tuple[str, int]:
        """(journal_mode, synchronous) in force: ("wal", 1) - NORMAL - as `connect` sets."""
        with self._lock:
            mode = self._db.execute("PRAGMA journal_mode").fetchone()[0]
            sync = self._db.execute("PRAGMA synchronous").fetchone()[0]
        return mode, sync

    @storage
    def backup(self) -> str:
        """A consistent copy into the state directory's backups (see `integrity.backup`)."""
        with self._lock:
            return integrity.backup(self._db, self.state_dir)

    def close(self) -> None:
        if self._db is not None:
            if self._backups and len(self):
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

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
