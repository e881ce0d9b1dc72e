"""Faults of the machine: the place a queue keeps its record cannot be written (or read).

A full disk (ENOSPC, a quota: EDQUOT), a read-only file system (EROFS, also what ext4 turns
into after an error with `errors=remount-ro`), an I/O error (EIO) and a folder the manager may
not write are not the user's mistakes and not an item's failure: no retry of the item fixes
them, and counting them as failed attempts would use up items' attempts for nothing. They are
one `StorageFault`, raised where the record is written (the local ledger, the item files and
logs beside it), and handled in one way by the manager (`manager.runtime.runner`):

    stop dispatching (the capacity is held, as under `workqueue pause`), let running work
    finish or put it back, record what can be recorded, say once what happened and what to
    do; a `--once` run then ends (exit 3), a long-running manager probes the folder every
    few seconds and dispatches again by itself when writes succeed.

Nothing is lost: every transition the ledger committed before the fault stands, an outcome
that could not be recorded leaves its item running in the ledger - it runs again after a
restart, never an item recorded succeeded.

`classify` turns the operating system's refusals into a `StorageFault` (or None: not a fault
of the machine); the folder's file system is asked (`statvfs`) whether it is read-only or full
before an I/O error is called one. SQLite's errors are the local ledger's to classify
(`manager.backends.local.sqlite_faults`): this module is the ports' layer and knows no
storage engine.
"""

from __future__ import annotations

import contextlib
import errno
import os

FULL = "full"
READ_ONLY = "read-only"
NOT_WRITABLE = "not-writable"
IO_ERROR = "io-error"
# a shared ledger's database (`manager.fleet`): it does not answer, takes no writes (read-only:
# a standby after a failover, `default_transaction_read_only`), has no room, or refuses us
UNREACHABLE = "unreachable"
LEDGER_READ_ONLY = "ledger-read-only"
LEDGER_FULL = "ledger-full"
LEDGER_ERROR = "ledger-error"
KINDS = (FULL, READ_ONLY, NOT_WRITABLE, IO_ERROR, UNREACHABLE, LEDGER_READ_ONLY, LEDGER_FULL,
         LEDGER_ERROR)  # fmt: skip

_BY_ERRNO = {
    errno.ENOSPC: FULL,
    errno.EDQUOT: FULL,
    errno.EFBIG: FULL,
    errno.EROFS: READ_ONLY,
    errno.EACCES: NOT_WRITABLE,
    errno.EPERM: NOT_WRITABLE,
    errno.EIO: IO_ERROR,
}


class StorageFault(Exception):
    """The queue's record cannot be written: `kind` is one of `KINDS`, `where` the folder.
    Its message is one line: what happened, what to do, and that nothing was lost."""

    def __init__(
        self, kind: str, where: str, detail: str = "", *, lost: str = "nothing was lost"
    ) -> None:
        self.kind = kind
        self.where = where
        self.detail = detail
        super().__init__(self.describe(lost=lost))

    def describe(self, *, lost: str = "nothing was lost", then: str = "run again") -> str:
        """The one line: what happened, what to do and `then` (a run: "run again"; a manager
        that waits: what it does by itself), and what became of the work (`lost`)."""
        where = self.where
        detail = f" ({self.detail})" if self.detail else ""
        if self.kind == UNREACHABLE:
            return f"the shared ledger {where} does not answer{detail}: {then}; {lost}"
        if self.kind == LEDGER_READ_ONLY:
            return (f"the shared ledger {where} takes no writes (read-only{detail}): make it "
                    f"writable (a primary, not a standby) and {then}; {lost}")  # fmt: skip
        if self.kind == LEDGER_FULL:
            return f"the shared ledger {where} has no room{detail}: free space and {then}; {lost}"
        if self.kind == LEDGER_ERROR:
            return f"the shared ledger {where} refused a statement{detail}: {then}; {lost}"
        if self.kind == FULL:
            return f"the state directory {where} is full: free space and {then}; {lost}"
        if self.kind == READ_ONLY:
            return (
                f"the state directory {where} is on a read-only file system: make it writable "
                f"(or use another --state-dir) and {then}; {lost}"
            )
        if self.kind == NOT_WRITABLE:
            return (
                f"cannot write to the state directory {where} (permission denied): give this "
                f"user write access (or use another --state-dir) and {then}; {lost}"
            )
        return (
            f"the state directory {where} gave an I/O error{detail}: check the disk (dmesg), "
            f"then `workqueue ledger check`, and {then}; {lost}"
        )

    def holding(self, every: float | None = None) -> str:
        """The line a manager that waits for the disk gives (`status`, the dashboard, its
        log): `every`, how often it tries again, when it is known."""
        tries = f" (it tries every {every:g}s)" if every is not None else ""
        return self.describe(
            lost="nothing is lost: running work goes on, nothing new starts",
            then=f"the manager carries on by itself{tries}",
        )

    @property
    def short(self) -> str:
        """A few words for a status line or a label: "state directory full"."""
        return {
            FULL: "the state directory is full",
            READ_ONLY: "the state directory is read-only",
            NOT_WRITABLE: "the state directory is not writable",
            UNREACHABLE: "the shared ledger does not answer",
            LEDGER_READ_ONLY: "the shared ledger is read-only",
            LEDGER_FULL: "the shared ledger is full",
            LEDGER_ERROR: "the shared ledger refuses a statement",
        }.get(self.kind, "the state directory gives I/O errors")


def diagnose(where: str) -> str | None:
    """What the file system of the folder `where` says of itself: READ_ONLY, FULL or None."""
    try:
        stat = os.statvfs(where)
    except OSError:
        return None
    if stat.f_flag & os.ST_RDONLY:
        return READ_ONLY
    if stat.f_bavail == 0 and stat.f_blocks > 0:
        return FULL
    return None


def classify(exc: BaseException, where: str) -> StorageFault | None:
    """The `StorageFault` that `exc` (raised writing or reading under `where`) is, or None."""
    if isinstance(exc, StorageFault):
        return exc
    if isinstance(exc, OSError):
        kind = _BY_ERRNO.get(exc.errno)
        if kind is None:
            return None
        if kind in (IO_ERROR, NOT_WRITABLE):
            kind = diagnose(where) or kind
        return StorageFault(kind, where, exc.strerror or "")
    return None


@contextlib.contextmanager
def raised_as_faults(where: str):
    """Run the block so that what the machine refused under `where` (see `classify`) leaves
    it as one `StorageFault`; any other error leaves as it came. (SQLite's errors: the
    local ledger's `sqlite_faults.raised_as_faults`.)"""
    try:
        yield
    except OSError as exc:
        fault = classify(exc, where)
        if fault is None:
            raise
        raise fault from None


def probe(where: str, size: int = 64 * 1024) -> None:
    """Write, sync and remove `size` bytes in `where`: a `StorageFault` unless the folder takes
    new data again (a freed byte or two is not yet room to work in)."""
    path = os.path.join(where, f".probe-{os.getpid()}")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, b"\0" * size)
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        fault = classify(exc, where)
        raise (fault or StorageFault(IO_ERROR, where, str(exc))) from exc
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass
