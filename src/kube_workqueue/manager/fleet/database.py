"""The shared ledger's connections: the ledger's own schema on every connection (its checked
address from `address.py`), and every error the database can return turned into either the
user's mistake or the manager's one kind of machine fault.

What the database says, sorted once here (`fault_of`), so that no thread that talks to it ever
dies of an answer:
    a mistake at the first connection - a wrong password, an unknown role or database, an SSL
        setting the server does not match, a URL option libpq refuses - is a `UserError`
        naming the cause (exit 2); the same answer later (the password changed under a
        running manager) is a fault, held like any other
    read-only (a standby after a failover, `default_transaction_read_only`)
                                     `StorageFault(LEDGER_READ_ONLY)`
    no room (a full disk or tablespace)   `StorageFault(LEDGER_FULL)`
    no answer (refused, reset, limited, shut down, timed out)   `StorageFault(UNREACHABLE)`
    anything else it can return      `StorageFault(LEDGER_ERROR)` - a refusal, never "does not
                                     answer" (an index row too large, a permission) -, logged
                                     once in full
The manager holds dispatch and probes for every fault (`manager.runtime.fault_hold`).

Every fault is a hold that ends by itself: a session that answered read-only, or with any
error that says the session is no use (`session_unusable`), is closed, and the next try opens a
new one - a session keeps `default_transaction_read_only` from its start, so one kept across a
read-only spell would refuse writes after the spell ended, for good.

Invariant: `Database._conn` is None or an open connection in autocommit mode whose
search_path is the ledger's schema, never one that answered as `session_unusable` says; it is
used under `_lock` only, one statement (or one `transaction()`) at a time. Each `Database` is
one connection: a part that must not wait for another (the heartbeat) has a `sibling()` of its
own. `_cursor` is None or a cursor of `_conn`, kept open for the sessions that are not nested in
another: a cursor made for each statement cost a third of psycopg's own time a statement (81-101
against 58-60 us of CPU, measured on one `UPDATE ... RETURNING`), on the path every item takes
twice. A nested session (a statement run inside another's) gets a cursor of its own.
"""

from __future__ import annotations

import contextlib
import logging
import re
import select
import threading
from collections.abc import Callable, Iterator

from ..errors import UserError
from ..faults import LEDGER_ERROR, LEDGER_FULL, LEDGER_READ_ONLY, UNREACHABLE, StorageFault
from .address import (  # noqa: F401 - (all but Address, address, driver: re-exported)
    DEFAULT_SCHEMA,
    SCHEMES,
    Address,
    address,
    check_url,
    driver,
    has_password,
    shown,
)
from .statements import Statement

log = logging.getLogger(__name__)
CONNECT_SECONDS = 5
KEPT_ROWS = 256  # the most rows a kept cursor holds on to after its session (`_cursor`)
STATEMENT_SECONDS = 60  # no statement of ours takes this long; a hung one must not hang a thread
# what libpq says at a connection when the user's settings are wrong, and what to tell them
_MISTAKES = (
    (re.compile(r"password authentication failed for user \"([^\"]*)\""),
     "the password of user {0} is wrong (PGPASSWORD, PGPASSFILE or ~/.pgpass)"),
    (re.compile(r"no password supplied"),
     "the server asks for a password and none was given: set PGPASSWORD or a PGPASSFILE"),
    (re.compile(r"authentication failed for user \"([^\"]*)\""),
     "the server refused user {0} (authentication failed)"),
    (re.compile(r"role \"([^\"]*)\" does not exist"), "there is no role {0} on the server"),
    (re.compile(r"database \"([^\"]*)\" does not exist"),
     "there is no database {0} on the server"),
    (re.compile(r"no pg_hba\.conf entry for host \"([^\"]*)\", user \"([^\"]*)\""),
     "the server's pg_hba.conf lets no connection of user {1} in from {0}"),
    (re.compile(r"permission denied for database \"?([^\"\s]*)"),
     "the user may not connect to database {0}"),
    (re.compile(r"(server does not support SSL[^\n]*|SSL[^\n]*|[^\n]*certificate[^\n]*)"),
     "SSL: {0} (check sslmode and the certificates)"),
    (re.compile(r"invalid (\w+) value: \"?([^\"\n]*)"), "invalid {0} in the URL: {1}"),
    # the URL's `options` (`-c NAME=VALUE`), which the server reads at the connection's start
    (re.compile(r"invalid value for parameter \"([^\"]*)\": \"([^\"]*)\""),
     "the URL's options set {0} to \"{1}\", which the server refuses"),
    (re.compile(r"unrecognized configuration parameter \"([^\"]*)\""),
     "the URL's options set {0}, a setting the server does not know"),
    (re.compile(r"parameter \"([^\"]*)\" requires an? (\w+) value"),
     "the URL's options set {0}, which takes a {1} value"),
    (re.compile(r"-c (\S+) requires a value"),
     "the URL's options give -c {0} without a value (options=-c NAME=VALUE)"),
    (re.compile(r"permission denied to set parameter \"([^\"]*)\""),
     "the user may not set {0} (the URL's options)"),
    (re.compile(r"parameter \"([^\"]*)\" cannot be (?:changed|set)[^\n]*"),
     "the URL's options set {0}, which cannot be set for a session"),
    (re.compile(r"(invalid command-line argument[^\n]*)"), "the URL's options: {0}"),
)  # fmt: skip
# what a server says at a connection's start that is a passing state, not the user's settings
_PASSING = re.compile(r"starting up|shutting down|not yet accepting|in recovery|too many "
                      r"(clients|connections)|connection slots|administrator command|"
                      r"terminating connection|not accepting connections")  # fmt: skip


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    text = lines[0]
    # libpq's "connection failed: connection to server at …, port … failed: FATAL:  reason"
    text = re.sub(r"^connection (failed|is bad): ", "", text)
    text = re.sub(r"^connection to server at [^:]*: ", "", text)
    text = re.sub(r"^FATAL:\s+", "", text)
    return text


def not_allowed(exc: BaseException, where: str, schema: str) -> str:
    """What to tell a user whose role may not do what the ledger needs (at its set-up)."""
    return (
        f"the shared ledger {where}: {_first_line(exc)} - grant the role USAGE and CREATE on "
        f"schema {schema} and all rights on its tables (or make it their owner), or name a "
        "schema it may use with ?schema=NAME"
    )


def mistake_of(exc: BaseException) -> str | None:
    """What the user must fix, when a failed connection says it was their settings: one of
    `_MISTAKES`, or any other refusal the server gave at the connection's start (`FATAL:`)
    that is not a passing state (`_PASSING`: starting, too many clients) - the server
    answered, so it is no outage."""
    text = str(exc)
    for pattern, say in _MISTAKES:
        found = pattern.search(text)
        if found:
            return say.format(*found.groups())
    refused = re.search(r"FATAL:\s+([^\n]+)", text)
    if refused and not _PASSING.search(refused.group(1)):
        return f"the server refused the connection: {refused.group(1).strip()}"
    return None


_SAID_IN_FULL: set[str] = set()  # ledgers whose unexpected refusal was logged with its trace

# SQLSTATE classes and codes after which a session is no use for the next try, though its
# connection is open: read-only (a standby, or `default_transaction_read_only` - a setting a
# session keeps from its start, so one opened during a read-only spell refuses writes for
# good even after the database is made writable again: only a new session sees the change),
# an operator's intervention (57: shut down, terminated, cannot connect now, idle session
# timeout), an idle transaction timed out, a transaction left failed.
_UNUSABLE_CLASSES = ("08", "57")
_UNUSABLE_CODES = ("25006", "25P02", "25P03")


def session_unusable(exc: BaseException) -> bool:
    """Whether the session that raised `exc` must be closed before the next try (see above)."""
    state = getattr(exc, "sqlstate", None) or ""
    return state[:2] in _UNUSABLE_CLASSES or state in _UNUSABLE_CODES


# SQLSTATE classes of a connection that is lost, refused or ended, or a server out of room for
# one more session: an outage. Every other answer (a value too large for an index - class 54,
# which psycopg files under OperationalError too -, bad data, a permission) is the server
# refusing what was asked: never "does not answer".
_OUTAGE_CLASSES = ("08", "57", "53")


def fault_of(exc: BaseException, where: str) -> StorageFault:
    """The fault a database error is (see the module docstring)."""
    from psycopg import errors

    if isinstance(exc, errors.ReadOnlySqlTransaction):
        return StorageFault(LEDGER_READ_ONLY, where, "")
    if isinstance(exc, errors.DiskFull):
        return StorageFault(LEDGER_FULL, where, _first_line(exc))
    state = getattr(exc, "sqlstate", None) or ""
    if isinstance(exc, errors.OperationalError | errors.InterfaceError) and (
        not state or state[:2] in _OUTAGE_CLASSES
    ):  # (no SQLSTATE: the client's own - refused, reset, timed out)
        return StorageFault(UNREACHABLE, where, _first_line(exc))
    return StorageFault(LEDGER_ERROR, where, f"{type(exc).__name__}: {_first_line(exc)}")


class Database:
    """One connection to the shared ledger, made when first used (see the module docstring).

    `statement_hook(name, phase, cursor)` - phase "before" or "after" - is called around
    every statement: the tests' seam for losing the connection at any statement."""

    def __init__(
        self, url: str | Address, *, purpose: str = "workqueue",
        fenced: threading.Event | None = None, set_up: threading.Event | None = None,
    ) -> None:  # fmt: skip
        self.address = url if isinstance(url, Address) else address(url)
        self.url = self.address.url
        self.where = self.address.where
        self.schema = self.address.schema
        self.purpose = purpose
        self.psycopg = driver()
        self._lock = threading.RLock()
        self._conn = None
        self._cursor = None  # (see the module docstring's invariant)
        self._sessions = 0  # how many sessions are open now (nested: the same thread)
        self.connected_once = False  # after a first connection, mistakes are faults
        # set once the ledger is set up (its schema made or checked, the manager joined):
        # until then a statement refused for want of a privilege is the user's to fix, not a
        # fault to wait out; shared with every sibling
        self._set_up = set_up or threading.Event()
        self.statement_hook: Callable[[str, str, object], None] | None = None
        self._fenced = fenced or threading.Event()  # shared with every sibling (`fence`)

    def sibling(self, purpose: str) -> Database:
        """Another connection to the same ledger (a part that must not wait for this one)."""
        other = Database(self.address, purpose=purpose, fenced=self._fenced,
                         set_up=self._set_up)  # fmt: skip
        other.connected_once = self.connected_once
        other.statement_hook = self.statement_hook
        return other

    def connect(self, *, autocommit: bool = True):
        """A new connection, its search_path the ledger's schema. Raises `UserError` for the
        user's mistake before any connection ever succeeded, else `StorageFault`."""
        if self._fenced.is_set():
            raise StorageFault(UNREACHABLE, self.where, "this manager was replaced by another "
                               "run of its queue: it opens no session")  # fmt: skip
        try:
            conn = self.psycopg.connect(
                self.address.conninfo, autocommit=autocommit, connect_timeout=CONNECT_SECONDS,
                application_name=self.purpose, keepalives=1, keepalives_idle=10,
                keepalives_interval=5, keepalives_count=3,
            )  # fmt: skip
        except self.psycopg.Error as exc:
            mistake = mistake_of(exc)
            if mistake is not None and not self.connected_once:
                raise UserError(f"the shared ledger {self.where}: {mistake}") from None
            raise fault_of(exc, self.where) from None
        try:
            conn.execute(
                "SELECT set_config('search_path', %s, false), "
                "set_config('statement_timeout', %s, false)",
                (f'"{self.schema}"', f"{STATEMENT_SECONDS}s"),
            )
            if not autocommit:
                conn.commit()
        except self.psycopg.Error as exc:
            with contextlib.suppress(Exception):
                conn.close()
            if isinstance(exc, self.psycopg.errors.QueryCanceled) and not self.connected_once:
                raise UserError(
                    f"the shared ledger {self.where}: the server cancelled the ledger's first "
                    f"statement ({_first_line(exc)}) - is a statement_timeout in the URL's "
                    "options? the ledger sets its own, and its statements must be able to run"
                ) from None
            raise fault_of(exc, self.where) from None
        self.connected_once = True
        return conn

    def _connected(self):
        if self._fenced.is_set():
            self._drop()  # (connect refuses: a fenced manager writes nothing more)
        if self._conn is None or self._conn.closed or self._conn.broken or _ended(self._conn):
            self._drop()
            self._conn = self.connect()
        return self._conn

    @contextlib.contextmanager
    def session(self) -> Iterator[Session]:
        """Statements one at a time on this connection (autocommit: each commits), under the
        lock; any database error leaves as a `StorageFault` (a lost connection dropped)."""
        with self._lock:
            self._sessions += 1
            try:
                conn = self._connected()
                if self._sessions > 1:  # nested in another session: a cursor of its own
                    with conn.cursor() as cur:
                        yield Session(cur, self)
                else:
                    if self._cursor is None or self._cursor.closed:
                        self._cursor = conn.cursor()
                    try:
                        yield Session(self._cursor, self)
                    finally:
                        self._let_go_of_big_results()
            except self.psycopg.Error as exc:
                if not self._set_up.is_set() and isinstance(
                    exc, self.psycopg.errors.InsufficientPrivilege
                ):
                    raise UserError(not_allowed(exc, self.where, self.schema)) from None
                if self._conn is not None and (
                    self._conn.closed or self._conn.broken or session_unusable(exc)
                ):
                    self._drop()  # the next try opens a new session
                fault = fault_of(exc, self.where)
                if fault.kind == LEDGER_ERROR and self.where not in _SAID_IN_FULL:
                    _SAID_IN_FULL.add(self.where)  # a bug or a changed schema: said in full once
                    log.error("the shared ledger %s: %s", self.where, fault.detail, exc_info=exc)
                raise fault from None
            finally:
                self._sessions -= 1

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Session]:
        """Statements in one transaction (committed at the end, rolled back on an error)."""
        with self.session() as session, session.cursor.connection.transaction():
            yield session

    def run(self, statement: Statement, sql_format: dict | None = None, **params) -> list[tuple]:
        """One statement on its own; its rows ([] when it returns none)."""
        with self.session() as session:
            return session.run(statement, sql_format, **params)

    def count(self, statement: Statement, sql_format: dict | None = None, **params) -> int:
        """One statement on its own; how many rows it changed."""
        with self.session() as session:
            return session.count(statement, sql_format, **params)

    def is_set_up(self) -> None:
        """The ledger is set up: a privilege refused from now on is a fault (a GRANT revoked
        under a running manager), held like any other."""
        self._set_up.set()

    def fence(self, timeout: float) -> bool:
        """No session of this connection or its siblings opens from now on; this one is
        closed once its statement in flight (if any) has ended - False if that took longer
        than `timeout` (a statement ends within `STATEMENT_SECONDS` at most)."""
        self._fenced.set()
        if not self._lock.acquire(timeout=timeout):
            return False
        try:
            self._drop()
        finally:
            self._lock.release()
        return True

    def _let_go_of_big_results(self) -> None:
        """A kept cursor holds its last result until its next statement: one of more than
        `KEPT_ROWS` rows (a full read of a million items) is not kept alive - that cursor is
        closed, and the next session makes another."""
        cursor = self._cursor
        result = None if cursor is None else cursor.pgresult
        if result is not None and result.ntuples > KEPT_ROWS:
            self._cursor = None
            with contextlib.suppress(Exception):
                cursor.close()

    def _drop(self) -> None:
        conn, self._conn, self._cursor = self._conn, None, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def close(self) -> None:
        with self._lock:
            self._drop()

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Session:
    """Named statements on one cursor (see `statements.py`)."""

    def __init__(self, cursor, db: Database) -> None:
        self.cursor = cursor
        self.db = db

    def execute(self, statement: Statement, sql_format: dict | None, params: dict) -> None:
        hook = self.db.statement_hook
        if hook is not None:
            hook(statement.name, "before", self.cursor)
        sql = statement.sql if sql_format is None else statement.sql.format(**sql_format)
        self.cursor.execute(sql, params)
        if hook is not None:
            hook(statement.name, "after", self.cursor)

    def run(self, statement: Statement, sql_format: dict | None = None, **params) -> list[tuple]:
        self.execute(statement, sql_format, params)
        result = self.cursor.pgresult  # (its status: `description` builds a Column a field)
        if result is None or result.status != self.db.psycopg.pq.ExecStatus.TUPLES_OK:
            return []
        return self.cursor.fetchall()

    def count(self, statement: Statement, sql_format: dict | None = None, **params) -> int:
        self.execute(statement, sql_format, params)
        return self.cursor.rowcount


def _ended(conn) -> bool:
    """Whether the server ended this idle connection while nobody used it (an outage's
    `pg_terminate_backend`, a restart): its farewell is waiting on the socket. A server says
    nothing unasked to an idle session that does not LISTEN (the notifier's connection is its
    own), so data waiting means an ending - found with a syscall, no round trip. Unchecked, the
    first statement after an outage met the dead connection and failed: a `--once` run whose
    every item had finished ended "does not answer" (exit 3) releasing its claims."""
    try:
        waiting, _, _ = select.select([conn.fileno()], [], [], 0)
    except (OSError, ValueError):  # no socket any more
        return True
    return bool(waiting)
