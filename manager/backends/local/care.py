"""The local ledger's own care: `workqueue ledger check | backup | restore`.

The checks are the ones every open runs (`integrity.py`); a backup is SQLite's online backup
(a manager may be running); a restore puts the newest sound backup (or a named file) in place,
keeping the damaged ledger aside, and is refused while a manager holds the state directory.
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
