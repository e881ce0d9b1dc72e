"""`status`, `retry`, `pause`, `resume`, `scale` on a queue whose ledger is shared.

The rules are `manager.backends.queue_ops.QueueOps`'s; the hooks here read and write the
database directly. Nothing is left as a request for "the" running manager (there may be
several, or none): a retried item is pending at once and the next claim of any manager takes
it; a pause or a parallelism is the queue's row, which every manager reads about twice a
second (`PostgresLedger.paused_since`).

`status` shows the queue with the facts of its live managers (those that said so within a
lease): one manager's as they are, several's with their parallelism added up - the slots
that serve the line, unless a parallelism was asked of the queue, which is the whole queue's -
and their ids in `managers`.
"""

from __future__ import annotations

import time

from ..log_tails import log_tail
from ..ports import QueueRecord, State
from ..shared.database import Database
from ..shared.ledger import PostgresLedger
from .queue_ops import QueueOps

COMMANDS_OWNER = "workqueue-command"  # the commands never claim; an owner no manager has


class SharedQueueOps(QueueOps):
    running_work = "running work on every manager"

    def __init__(self, url: str) -> None:
        self.db = Database(url)
        self.where = self.db.where
        self._ledger: PostgresLedger | None = None

    @property
    def ledger(self) -> PostgresLedger:
        if self._ledger is None:
            self._ledger = PostgresLedger(self.db, COMMANDS_OWNER)
        return self._ledger

    def close(self) -> None:
        self.db.close()

    def status(self, listed: list[str] | None = None) -> QueueRecord:
        ledger = self.ledger
        facts = self.live_facts()
        return QueueRecord(
            self.where,
            ledger.rows(),
            facts,
            paused_since=ledger.paused_since(),
            held=(facts or {}).get("held"),
            # a running item whose manager is gone runs again once its claim runs out
            work_outlives_manager=False,
        )

    def live_facts(self) -> dict | None:
        """The facts of the managers that said so within a lease (see the module docstring)."""
        asked = self.ledger.wanted_parallelism()  # (the ledger first: its schema made)
        with self.db.cursor() as cur:
            cur.execute(
                "SELECT id, facts FROM managers WHERE facts IS NOT NULL "
                "AND said > now() - make_interval(secs => lease) ORDER BY said DESC"
            )
            found = cur.fetchall()
        if not found:
            return None
        facts = dict(found[0][1])
        if len(found) > 1 and asked is None:
            # each runs its own --parallelism: the queue's is their sum (an asked one is the
            # whole queue's already, and every manager's facts say it)
            facts["parallelism"] = sum(int(f.get("parallelism") or 0) for _, f in found)
        facts["managers"] = sorted(manager for manager, _ in found)
        held = [f.get("held") for _, f in found if f.get("held")]
        if held:
            facts["held"] = held[0]
        return facts

    def item_detail(self, name: str, record: QueueRecord, lines: int = 20) -> dict:
        """The tail of the item's log (when this machine has it) and the versions it ran at."""
        row = next((r for r in record.rows if r.name == name), None)
        versions = self.ledger.history(name)
        if row is not None and row.version is not None:
            versions.append({"version": row.version, "state": row.state,
                             "attempts": row.attempts, "finished": row.finished})  # fmt: skip
        tail = log_tail(row.log_path, lines) if row is not None and row.log_path else None
        return {"log_tail": tail, "versions": versions}

    def state_of(self, name: str) -> str | None:
        found = self.ledger.row(name)
        return None if found is None else found.state

    def failed_names(self, listed: list[str] | None) -> list[str]:
        return [r.name for r in self.ledger.rows(State.FAILED)]

    def run_again(self, name: str) -> bool:
        return self.ledger.retry(name)

    def retried(self, name: str, state: str) -> str:
        return f"{name}: pending again; the next free manager runs it"

    def paused_since(self) -> float | None:
        return self.ledger.paused_since()

    def hold(self, since: float | None) -> None:
        self.ledger.set_setting("paused_since", since)

    def accept_removals(self) -> None:
        self.ledger.set_setting("removals_accepted", time.time())

    def asked_parallelism(self) -> int | None:
        return self.ledger.wanted_parallelism()

    def ask_parallelism(self, parallelism: int) -> None:
        self.ledger.want_parallelism(parallelism)

    def autoscaled(self) -> bool:
        facts = self.live_facts()
        return bool(facts and facts.get("autoscale"))
