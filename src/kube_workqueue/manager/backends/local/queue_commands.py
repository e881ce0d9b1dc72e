"""`status`, `retry`, `pause`, `resume` on a local queue: its ledger and the files beside it.

The rules are `manager.queue_ops.QueueOps`'s; the hooks here read the ledger (shared,
read-only where the folder cannot be written) and change it - held exclusively when no manager
runs on the state directory, else by leaving a request the running manager takes at its next
poll (`SqliteLedger.request_retry`). The queue is paused by a file beside the ledger.
"""

from __future__ import annotations

import os

from ...faults import StorageFault, diagnose
from ...items import QueueRecord
from ...log_tails import log_tail
from ...ports import State
from ...queue_ops import QueueOps
from .ledger import SqliteLedger, existing_ledger
from .ledger_file import LedgerBusy
from .state_files import QueueFiles, read_paused, running_manager


class LocalQueueOps(QueueOps):
    def __init__(self, state_dir: str) -> None:
        self.state_dir = state_dir
        self.where = os.path.abspath(state_dir)
        # Invariant: None, or the ledger opened for the commands' reads and changes; _busy
        # says a manager holds the directory (changes are then left as its requests).
        self._ledger: SqliteLedger | None = None
        self._busy = False
        self._reader: SqliteLedger | None = None  # shared, for the reads of `status`

    def close(self) -> None:
        for ledger in (self._ledger, self._reader):
            if ledger is not None:
                ledger.close()
        self._ledger = self._reader = None

    def _reading(self) -> SqliteLedger:
        """The ledger opened shared (a running manager keeps its hold), once."""
        if self._reader is None:
            self._reader = existing_ledger(self.state_dir, mirrored=False)  # rows are read
        return self._reader

    def _opened(self) -> SqliteLedger:
        """The ledger, held exclusively when no manager runs on it; else shared."""
        if self._ledger is None:
            try:
                self._ledger = existing_ledger(self.state_dir, exclusive=True)
            except LedgerBusy:
                self._ledger, self._busy = existing_ledger(self.state_dir), True
        return self._ledger

    def status(self, listed: list[str] | None = None) -> QueueRecord:
        """The queue as its ledger has it, and the facts of the manager running on it now
        (the ledger names every item it has seen: `listed` adds nothing here)."""
        rows = self._reading().rows()
        facts = running_manager(self.state_dir)
        return QueueRecord(
            self.where,
            rows,
            facts,
            paused_since=read_paused(self.state_dir),
            held=_held(facts, self.where),
            work_outlives_manager=False,  # a worker is a child of its manager: it stops with it
        )

    def item_detail(self, name: str, record: QueueRecord, lines: int = 20) -> dict:
        """The tail of the item's log, and the versions it ran at (earlier runs, then the
        latest), oldest first."""
        row = next((r for r in record.rows if r.name == name), None)
        versions = self._reading().history(name)
        if row is not None and row.version is not None:
            versions.append(
                {
                    "version": row.version,
                    "state": row.state,
                    "attempts": row.attempts,
                    "finished": row.finished,
                }
            )
        tail = log_tail(row.log_path, lines) if row is not None and row.log_path else None
        return {"log_tail": tail, "versions": versions}

    def state_of(self, name: str) -> str | None:
        current = self._opened().state(name)
        return None if current is None else current[0]

    def failed_names(self, listed: list[str] | None) -> list[str]:
        return [r.name for r in self._opened().rows(State.FAILED)]

    def run_again(self, name: str) -> bool:
        ledger = self._opened()
        if self._busy:
            ledger.request_retry(name)
            return True
        return ledger.retry(name)

    def retried(self, name: str, state: str) -> str:
        if self._busy:
            return f"{name}: the running manager will run it again"
        return f"{name}: pending again; the next manager run will run it"

    def controls(self, *, change: bool) -> QueueFiles:
        """The files beside the ledger, which its manager reads (`QueueFiles`); a clear error
        where no manager ever ran (the ledger is opened first)."""
        self._opened()
        return QueueFiles.at(self.state_dir)

    def autoscaled(self) -> bool:
        facts = running_manager(self.state_dir)
        return bool(facts and facts.get("autoscale"))


def _held(facts: dict | None, state_dir: str) -> str | None:
    """Why the running manager holds dispatch: what it said (`Asked.facts`), or - when the
    disk refuses even that note - what the state directory's file system says of itself."""
    if not facts:
        return None
    if facts.get("held"):
        return str(facts["held"])
    kind = diagnose(state_dir)
    if kind is None:
        return None
    return StorageFault(kind, state_dir).holding()
