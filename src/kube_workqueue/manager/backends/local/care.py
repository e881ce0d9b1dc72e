"""The local ledger's own care: `workqueue ledger check | backup | restore | migrate`.

The checks are the ones every open runs (`integrity.py`); a backup is SQLite's online backup
(a manager may be running); a restore puts the newest sound backup (or a named file) in place,
keeping the damaged ledger aside, and is refused while a manager holds the state directory, as
is a migration into a shared ledger (`manager.fleet.migrate`).
"""

from __future__ import annotations

import os

from ...errors import UserError
from . import integrity
from .ledger import SqliteLedger, existing_ledger


def check_ledger(state_dir: str) -> str:
    """Run the open-time checks; a line for people, or `LedgerDamaged`."""
    with existing_ledger(state_dir) as ledger:
        items = len(ledger)
        mode, sync = ledger.durability()
    kept = integrity.backups(ledger.state_dir)
    newest = f", newest {os.path.basename(kept[0])}" if kept else ""
    return (
        f"ledger {ledger.path}: sound, {items} items, schema {integrity.SCHEMA_VERSION}, "
        f"journal {mode}, synchronous {'NORMAL' if sync == 1 else sync}; "
        f"{len(kept)} backup(s){newest}"
    )


def backup_ledger(state_dir: str) -> str:
    """A backup now (a manager may be running: SQLite's online backup is consistent)."""
    with existing_ledger(state_dir) as ledger:
        return f"backed up {ledger.path} to {ledger.backup()}"


def restore_ledger(state_dir: str, source: str | None = None) -> str:
    """Put the newest sound backup (or `source`) in place; refused while a manager runs."""
    if not os.path.isdir(state_dir):
        raise UserError(f"no state directory {state_dir}")
    ledger = SqliteLedger(state_dir)
    ledger.lock()
    try:
        used, kept = integrity.restore(ledger.path, ledger.state_dir, source)
    finally:
        ledger.unlock()
    with existing_ledger(state_dir) as restored:
        counts = restored.counts()
    aside = f"; the old ledger is kept as {kept}" if kept else ""
    done = ", ".join(f"{n} {state}" for state, n in counts.items())
    return f"restored {restored.path} from {used} ({done}){aside}"


def migrate_ledger(state_dir: str, url: str) -> str:
    """Copy the state directory's ledger into the shared ledger at `url` (see
    `manager.fleet.migrate`); refused while a manager holds the directory, or while the
    ledger says an item runs."""
    from ...fleet.database import Database
    from ...fleet.migrate import copy_in
    from .ledger_file import LedgerBusy
    from .state_files import read_parallelism, read_paused

    try:
        ledger = existing_ledger(state_dir, exclusive=True)
    except LedgerBusy:
        raise UserError(
            f"a manager is running on {state_dir}: stop it, then migrate its ledger"
        ) from None
    with ledger:
        rows = ledger.rows()
        running = [r.name for r in rows if r.state == "running"]
        if running:
            raise UserError(
                f"{len(running)} item(s) of {state_dir} are marked running (a manager stopped "
                "without settling them): run the manager once more and stop it, then migrate"
            )
        runs = [
            {"name": name, **run} for name in {r.name for r in rows}
            for run in ledger.history(name)
        ]  # fmt: skip
        settings = {
            "paused_since": read_paused(state_dir),
            "parallelism": read_parallelism(state_dir),
        }
        db = Database(url)
        try:
            moved = copy_in(db, rows, runs, settings)
        finally:
            db.close()
        return moved.describe(ledger.path, db.where)
