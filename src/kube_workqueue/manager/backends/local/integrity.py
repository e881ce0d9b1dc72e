"""The local ledger's integrity: it knows it is a ledger, checks itself at open, and keeps
backups - so a damaged disk never costs an item silently.

A ledger is stamped when it is made: SQLite's header carries our `application_id` and the
schema version in `user_version`. Opening checks, before anything is read or dispatched:

  * the file: missing or empty is a new ledger only when the state directory shows no earlier
    run (no logs, no backups) - otherwise the record of what already ran is gone, and running
    would run it all again;
  * the header: an SQLite database ("SQLite format 3"), stamped as ours or an unstamped ledger
    of an earlier version (it has the `items` table; it is stamped now), of a schema version
    this code knows;
  * `PRAGMA quick_check`: the pages and indexes are sound.

Anything else is `LedgerDamaged`: one line naming the file, what is wrong and what to do.

Backups use SQLite's online backup API (a consistent copy while the ledger is in use) into
`STATE_DIR/backups/`, newest `KEEP_BACKUPS` kept. A manager takes one when it starts and when it
stops; `workqueue ledger backup` takes one on demand, `workqueue ledger restore` puts the newest
sound one (or a named file) back, keeping the damaged ledger aside.
"""

from __future__ import annotations

import os
import sqlite3
import time

from ...errors import UserError
from .sqlite_faults import classify

APPLICATION_ID = 0x57514C47  # "WQLG"
SCHEMA_VERSION = 2  # 2: items.version and the runs history (from 1: added in place)
SQLITE_HEADER = b"SQLite format 3\x00"
BACKUPS_DIR = "backups"
LOGS_DIR = "logs"
KEEP_BACKUPS = 5


class LedgerDamaged(UserError):
    """The ledger cannot be trusted; nothing may run on it."""


def _restore_hint(state_dir: str) -> str:
    return f"restore it with `workqueue ledger restore --state-dir {state_dir}`"


def damaged(path: str, state_dir: str, why: object) -> LedgerDamaged:
    """The error for a ledger SQLite itself finds damaged: what it said, and what to do."""
    return LedgerDamaged(f"ledger {path} is damaged ({why}): {_restore_hint(state_dir)}")


def earlier_runs(state_dir: str) -> str | None:
    """What in `state_dir` shows that a manager ran there before, or None."""
    for folder, what in ((LOGS_DIR, "worker logs"), (BACKUPS_DIR, "ledger backups")):
        path = os.path.join(state_dir, folder)
        try:
            if any(e.is_file() for e in os.scandir(path)):
                return what
        except OSError:
            continue
    return None


def check_file(path: str, state_dir: str) -> None:
    """Before opening: the file is a ledger to check, or a new one to make; `LedgerDamaged`
    when it can be neither."""
    try:
        size = os.path.getsize(path)
    except FileNotFoundError:
        size = None
    if not size:
        evidence = earlier_runs(state_dir)
        if evidence is not None:
            state = "missing" if size is None else "empty (0 bytes)"
            raise LedgerDamaged(
                f"ledger {path} is {state}, but {state_dir} has {evidence} of earlier runs: "
                f"{_restore_hint(state_dir)}, or use a new --state-dir to start afresh"
            )
        return
    with open(path, "rb") as f:
        header = f.read(len(SQLITE_HEADER))
    if header != SQLITE_HEADER:
        raise LedgerDamaged(
            f"ledger {path} is not an SQLite database (damaged or overwritten): "
            f"{_restore_hint(state_dir)}"
        )


def check_database(db: sqlite3.Connection, path: str, state_dir: str, *, stamp: bool) -> None:
    """After opening: ours, a known schema, sound pages. `stamp` marks a new or earlier-version
    ledger as ours (only a manager's exclusive open writes)."""
    try:
        app = db.execute("PRAGMA application_id").fetchone()[0]
        version = db.execute("PRAGMA user_version").fetchone()[0]
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if app not in (0, APPLICATION_ID) or (app == 0 and tables and "items" not in tables):
            raise LedgerDamaged(
                f"{path} is an SQLite database of something else, not a workqueue ledger: "
                "move it away or use another --state-dir"
            )
        if version > SCHEMA_VERSION:
            raise LedgerDamaged(
                f"ledger {path} has schema {version}, newer than this workqueue knows "
                f"({SCHEMA_VERSION}): upgrade workqueue"
            )
        result = db.execute("PRAGMA quick_check").fetchone()[0]
        if result != "ok":
            raise damaged(path, state_dir, result)
        if stamp and (app == 0 or version < SCHEMA_VERSION):
            db.execute(f"PRAGMA application_id={APPLICATION_ID}")
            db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
    except sqlite3.DatabaseError as exc:
        raise classify(exc, state_dir) or damaged(path, state_dir, exc) from None


def backups(state_dir: str) -> list[str]:
    """The backups in `state_dir`, newest first."""
    folder = os.path.join(state_dir, BACKUPS_DIR)
    try:
        names = [
            n for n in os.listdir(folder) if n.startswith("ledger-") and n.endswith(".sqlite3")
        ]
    except FileNotFoundError:
        return []
    return [os.path.join(folder, n) for n in sorted(names, reverse=True)]


def backup(db: sqlite3.Connection, state_dir: str, *, now: float | None = None) -> str:
    """A consistent copy of the open ledger into the backups folder; the oldest beyond
    `KEEP_BACKUPS` are removed. Returns the new backup's path."""
    folder = os.path.join(state_dir, BACKUPS_DIR)
    os.makedirs(folder, exist_ok=True)
    now = time.time() if now is None else now
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now)) + f"{now % 1:.6f}"[1:]
    path = os.path.join(folder, f"ledger-{stamp}.sqlite3")
    partial = path + ".part"
    try:
        target = sqlite3.connect(partial)
        try:
            db.backup(target)
        finally:
            target.close()
        os.replace(partial, path)
    except BaseException:  # a backup cut short (a full disk) must not hold the space it took
        try:
            os.unlink(partial)
        except OSError:
            pass
        raise
    for old in backups(state_dir)[KEEP_BACKUPS:]:
        os.unlink(old)
    return path


def sound(path: str) -> bool:
    """Whether a backup file is a sound ledger (our stamp, quick_check ok)."""
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            app = db.execute("PRAGMA application_id").fetchone()[0]
            return app == APPLICATION_ID and db.execute("PRAGMA quick_check").fetchone()[0] == "ok"
        finally:
            db.close()
    except sqlite3.DatabaseError:
        return False


def restore(ledger_path: str, state_dir: str, source: str | None = None) -> tuple[str, str | None]:
    """Put a sound backup (the newest, or `source`) in place of the ledger; the current file,
    if any, is kept beside it as `ledger.sqlite3.damaged-<time>`. The caller holds the state
    directory's lock. Returns (the backup used, where the old ledger went)."""
    candidates = [source] if source else backups(state_dir)
    chosen = next((c for c in candidates if os.path.isfile(c) and sound(c)), None)
    if chosen is None:
        what = f"{source} is not a sound workqueue ledger" if source else "no sound backup"
        raise LedgerDamaged(f"cannot restore {ledger_path}: {what}")
    kept = None
    if os.path.exists(ledger_path):
        kept = f"{ledger_path}.damaged-{time.strftime('%Y%m%dT%H%M%S')}"
        os.replace(ledger_path, kept)
    for extra in ("-wal", "-shm"):  # the old ledger's journal must not be replayed onto this one
        if os.path.exists(ledger_path + extra):
            os.replace(ledger_path + extra, (kept or ledger_path) + extra + ".old")
    source_db = sqlite3.connect(f"file:{chosen}?mode=ro", uri=True)
    target = sqlite3.connect(ledger_path)
    try:
        source_db.backup(target)
    finally:
        target.close()
        source_db.close()
    return chosen, kept
