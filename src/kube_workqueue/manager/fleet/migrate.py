"""A queue's record moved into a shared ledger: `workqueue ledger migrate --to URL`.

What ran stays run: every item comes over with its state, attempts, priority, arrival, times,
exit code, log path, last error and version, in its arrival order, and its earlier runs with
it; the queue's pause and asked parallelism too. A succeeded item is therefore never run again
by the managers that share the ledger next; a failed one keeps the attempts it used.

The copy is one transaction: a migration that fails leaves the shared ledger as it was. Items
the shared ledger knows already (another machine's queue moved there before, on the same
source) keep what the shared ledger says - the copy never overwrites - and are counted.
The caller's duties: no manager runs on the queue being moved (its record must hold still),
and none of its items is running.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..lifecycle import STARTABLE
from ..ports import Row, State
from . import schema
from . import statements as sql
from .database import Database

BATCH = 5000


@dataclass(frozen=True)
class Moved:
    items: int
    kept: int  # already in the shared ledger: left as it says
    runs: int

    def describe(self, source: str, target: str) -> str:
        kept = f", {self.kept} it knew already kept as it had them" if self.kept else ""
        return (
            f"moved {self.items} items ({self.runs} earlier runs) from {source} into "
            f"the shared ledger {target}{kept}"
        )


def copy_in(db: Database, rows: list[Row], runs: list[dict], settings: dict) -> Moved:
    """Copy `rows` (in arrival order), their earlier `runs` and the queue's `settings`
    (`paused_since`, `parallelism`) into the shared ledger, in one transaction."""
    schema.migrate(db)
    if any(r.state == State.RUNNING for r in rows):
        raise ValueError("running items cannot be moved")
    ordered = sorted(rows, key=lambda r: (r.first_seen, r.name))
    added: set[str] = set()
    with db.transaction() as session:
        for start in range(0, len(ordered), BATCH):
            chunk = ordered[start : start + BATCH]
            found = session.run(
                sql.COPY_IN_ITEMS,
                names=[r.name for r in chunk], states=[r.state for r in chunk],
                attempts=[r.attempts for r in chunk], priorities=[r.priority for r in chunk],
                first_seen=[r.first_seen for r in chunk], started=[r.started for r in chunk],
                finished=[r.finished for r in chunk], exit_codes=[r.exit_code for r in chunk],
                log_paths=[r.log_path for r in chunk], errors=[r.last_error for r in chunk],
                versions=[r.version for r in chunk],
                claimable=[r.state in STARTABLE for r in chunk],
            )  # fmt: skip
            added.update(row[0] for row in found)
        moved_runs = [run for run in runs if run["name"] in added]
        for run in moved_runs:
            session.run(
                sql.COPY_IN_RUN, name=run["name"], version=run.get("version"),
                state=run["state"], attempts=run["attempts"], started=run.get("started"),
                finished=run.get("finished"), exit_code=run.get("exit_code"),
                last_error=run.get("last_error"),
            )  # fmt: skip
        for column in ("paused_since", "parallelism"):
            if settings.get(column) is not None:
                session.run(sql.SETTING[column], value=settings[column])
        session.run(sql.NOTIFY_LINE)
    return Moved(len(added), len(rows) - len(added), len(moved_runs))
