"""SQLite's errors as faults of the machine: the local ledger's half of `manager.faults`.

SQLite says "disk I/O error" for any write the kernel refused, "database or disk is full",
"attempt to write a readonly database", or - reading pages back from a disk that is failing -
"database disk image is malformed". Which of these is the machine's fault (a `StorageFault`:
the manager holds dispatch and nothing is lost) and which is the ledger's own damage
(`integrity.damaged`) is decided here, by the error's primary result code and by asking the
folder: its file system (`faults.diagnose`: read-only? full?) and, for a page that looks
damaged, whether a small new file there is refused with EIO. The ports' layer (`faults.py`)
knows no storage engine; only the local ledger's modules import this one.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3

from ...faults import FULL, IO_ERROR, NOT_WRITABLE, StorageFault, diagnose
from ...faults import classify as classify_os_error

# SQLite's primary result codes (the low byte of an extended code) that the machine causes.
_SQLITE_READONLY, _SQLITE_IOERR, _SQLITE_CORRUPT, _SQLITE_FULL, _SQLITE_CANTOPEN = 8, 10, 11, 13, 14


def classify(exc: BaseException, where: str) -> StorageFault | None:
    """The `StorageFault` that `exc` (an OS or SQLite error met under `where`) is, or None:
    not a fault of the machine."""
    if not isinstance(exc, sqlite3.DatabaseError):
        return classify_os_error(exc, where)
    code = getattr(exc, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    if primary == _SQLITE_FULL:
        return StorageFault(FULL, where, str(exc))
    if primary in (_SQLITE_IOERR, _SQLITE_READONLY, _SQLITE_CANTOPEN):
        seen = diagnose(where)
        if seen is not None:
            return StorageFault(seen, where, str(exc))
        if primary == _SQLITE_IOERR:
            return StorageFault(IO_ERROR, where, str(exc))
        if not os.access(where, os.W_OK):
            return StorageFault(NOT_WRITABLE, where, str(exc))
    if primary == _SQLITE_CORRUPT and _gives_io_errors(where):
        # pages read back from a disk that fails look damaged: the disk is the fault
        return StorageFault(IO_ERROR, where, str(exc))
    return None


def _gives_io_errors(where: str) -> bool:
    """Whether the folder's disk answers a small new file with EIO (a disk that is gone still
    serves what the kernel has cached: only a write tells)."""
    path = os.path.join(where, f".io-check-{os.getpid()}")
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600))
        os.unlink(path)
    except OSError as exc:
        return exc.errno == errno.EIO
    return False


@contextlib.contextmanager
def raised_as_faults(where: str):
    """Run the block so that what the machine refused under `where` - an OS or a SQLite error
    (see `classify`) - leaves it as one `StorageFault`; any other error leaves as it came."""
    try:
        yield
    except (OSError, sqlite3.DatabaseError) as exc:
        fault = classify(exc, where)
        if fault is None:
            raise
        raise fault from None
