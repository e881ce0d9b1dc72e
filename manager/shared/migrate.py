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

from ..ports import Row, State
from . import schema
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
        cur = session.cursor
        for start in range(0, len(ordered), BATCH):
            chunk = ordered[start : start + BATCH]
            cur.execute(
                "INSERT INTO items (name, state, attempts, priority, first_seen, started, "
                "finished, exit_code, log_path, last_error, version, claimable) "
                "SELECT n, s, a, p, fs, st, fi, ec, lp, le, v, c FROM unnest("
                "%s::text[], %s::text[], %s::int[], %s::int[], %s::float8[], %s::float8[], "
                "%s::float8[], %s::int[], %s::text[], %s::text[], %s::text[], %s::bool[]) "
                "WITH ORDINALITY AS t(n, s, a, p, fs, st, fi, ec, lp, le, v, c, i) "
                "ORDER BY i ON CONFLICT (name) DO NOTHING RETURNING name",
                (
                    [r.name for r in chunk], [r.state for r in chunk],
                    [r.attempts for r in chunk], [r.priority for r in chunk],
                    [r.first_seen for r in chunk], [r.started for r in chunk],
                    [r.finished for r in chunk], [r.exit_code for r in chunk],
                    [r.log_path for r in chunk], [r.last_error for r in chunk],
                    [r.version for r in chunk],
                    [r.state in (State.PENDING, State.FAILED) for r in chunk],
                ),
            )  # fmt: skip
            added.update(found[0] for found in cur.fetchall())
        moved_runs = [run for run in runs if run["name"] in added]
        for run in moved_runs:
            cur.execute(
                "INSERT INTO runs (name, version, state, attempts, started, finished, "
                "exit_code, last_error) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                (run["name"], run.get("version"), run["state"], run["attempts"],
                 run.get("started"), run.get("finished"), run.get("exit_code"),
                 run.get("last_error")),
            )  # fmt: skip
        if settings.get("paused_since") is not None:
            cur.execute("UPDATE queue SET paused_since = %s", (settings["paused_since"],))
        if settings.get("parallelism") is not None:
            cur.execute("UPDATE queue SET parallelism = %s", (settings["parallelism"],))
        cur.execute("NOTIFY workqueue_line")
    return Moved(len(added), len(rows) - len(added), len(moved_runs))
