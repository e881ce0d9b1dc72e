"""The shared ledger's connection: a libpq URL checked and shown without its password, one
connection per use kept open and made again after an outage, every failure to reach the
database turned into the manager's one kind of machine fault.

    postgresql://user@host:5432/db     the password from the environment (PGPASSWORD) or a
                                       file (PGPASSFILE, ~/.pgpass), as libpq reads them;
                                       one written into the URL works too, and is never shown

`shown(url)` is the URL with any password replaced by `***`: what logs, `status` and errors
print. A database that does not answer (refused, reset, timed out, shut down) is a
`StorageFault(UNREACHABLE)`: the manager holds dispatch and probes, as for a full disk
(`manager.runtime.fault_hold`); every other database error is a bug and propagates as it is.

Invariant: `Database._conn` is None or an open connection in autocommit mode; it is used
under `_lock` only, one statement (or one `transaction()`) at a time.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

from ..errors import InputError, UserError
from ..faults import UNREACHABLE, StorageFault

SCHEMES = ("postgresql", "postgres")
CONNECT_SECONDS = 5


def check_url(text: str) -> str:
    """A shared ledger's URL, checked: `postgresql://…` with a database name."""
    parts = urlsplit(text.strip())
    if parts.scheme not in SCHEMES:
        raise InputError(f"not a PostgreSQL URL (postgresql://user@host/database): {shown(text)}")
    if not parts.path.strip("/"):
        raise InputError(f"name the database (postgresql://host/NAME): {shown(text)}")
    return text.strip()


def shown(url: str) -> str:
    """`url` as it may be printed: any password replaced by ***."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    user = parts.username or ""
    netloc = f"{user}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def _driver():
    try:
        import psycopg
    except ImportError:
        raise UserError(
            "a shared ledger needs the PostgreSQL driver: pip install 'workqueue[postgresql]'"
        ) from None
    return psycopg


def unreachable(exc: BaseException, url: str) -> StorageFault:
    first = str(exc).strip().splitlines()
    return StorageFault(UNREACHABLE, shown(url), first[0] if first else type(exc).__name__)


class Database:
    """One connection to the shared ledger's database, made when first used."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.where = shown(url)
        self.psycopg = _driver()
        self._lock = threading.RLock()
        self._conn = None

    def _connect(self, name: str):
        return self.psycopg.connect(
            self.url, autocommit=True, connect_timeout=CONNECT_SECONDS, application_name=name
        )

    def _connected(self):
        if self._conn is None or self._conn.closed:
            self._conn = self._connect("workqueue")
        return self._conn

    @contextlib.contextmanager
    def cursor(self) -> Iterator:
        """A cursor on the connection (autocommit: each statement commits), under the lock; a
        lost connection is dropped and raised as a `StorageFault`."""
        with self._lock:
            try:
                conn = self._connected()
                with conn.cursor() as cur:
                    yield cur
            except (self.psycopg.OperationalError, self.psycopg.InterfaceError) as exc:
                self._drop()
                raise unreachable(exc, self.url) from None

    @contextlib.contextmanager
    def transaction(self) -> Iterator:
        """A cursor inside one transaction (committed at the end, rolled back on an error)."""
        with self.cursor() as cur, cur.connection.transaction():
            yield cur

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def listener(self):
        """A connection of its own for LISTEN (notifications come on it while it waits);
        `StorageFault` when the database does not answer."""
        try:
            return self._connect("workqueue-listen")
        except self.psycopg.OperationalError as exc:
            raise unreachable(exc, self.url) from None

    def close(self) -> None:
        with self._lock:
            self._drop()
