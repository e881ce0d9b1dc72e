"""`status`, `retry`, `pause`, `resume`, `scale`, `drain` on a queue whose ledger is shared.

The rules are `manager.queue_ops.QueueOps`'s; the hooks here read and write the
database directly. Nothing is left as a request for "the" running manager (there may be
several, or none): a retried item is pending at once and the next claim of any manager takes
it; a pause or a parallelism is the queue's row, which every manager reads about twice a
second (`PostgresLedger.paused_since`). Reading commands create nothing: a database without
the ledger is "no queue here" (`schema.check`); only a write (pause, scale) makes it.

`status` shows the queue with the facts of its live managers (those heard from within their
lease): one manager's as they are, several's with their parallelism added up - the slots
that serve the line, unless a parallelism was asked of the queue, which is the whole queue's -
and their ids in `managers`. A manager whose heartbeat is late (no beat for half its lease)
is listed as silent, "not heard from for N s", and the items it holds are "held by a silent
manager"; once a whole lease has passed its parallelism no longer counts (its claims go back
to the line as soon as a live manager has watched it stay silent that long). A manager asked
to drain is listed as draining while it holds items, then drained.
"""

from __future__ import annotations

from ..durations import human
from ..errors import UserError
from ..items import QueueRecord
from ..log_tails import log_tail
from ..ports import State
from ..queue_ops import QueueOps
from . import manager_statements as managers_sql
from . import placement_statements as placement_sql
from . import statements as sql
from .database import Database
from .ledger import PostgresLedger
from .placed import live_offers, unmet_ids

COMMANDS_OWNER = "workqueue-command"  # the commands never claim; an owner no manager has


class FleetQueueOps(QueueOps):
    running_work = "running work on every manager"

    def __init__(self, url: str) -> None:
        self.db = Database(url)
        self.where = self.db.where
        self._ledger: PostgresLedger | None = None

    @property
    def ledger(self) -> PostgresLedger:
        """The ledger as it is (`UserError` "no queue here" when the database has none)."""
        if self._ledger is None:
            self._ledger = PostgresLedger(self.db, COMMANDS_OWNER, read_only=True)
        return self._ledger

    def _writable(self) -> PostgresLedger:
        """The ledger, made first when the database has none yet (a pause before any
        manager started) - and then said (`made`): a mistyped database or schema would
        otherwise get a queue without a word."""
        if self._ledger is None:
            from ..fleet import schema

            new = schema.version_of(self.db) == 0
            self._ledger = PostgresLedger(self.db, COMMANDS_OWNER)
            if new:
                self.made = (f"(no queue was there: made one in {self.where}, schema "
                             f"{self.db.schema} - its managers will find it so)")  # fmt: skip
        return self._ledger

    def _if_any(self, read, otherwise):
        """`read(ledger)`, or `otherwise` when the database holds no queue yet."""
        try:
            ledger = self.ledger
        except UserError:
            if self.db.connected_once and self._ledger is None:
                return otherwise
            raise
        return read(ledger)

    def close(self) -> None:
        if self._ledger is not None:
            self._ledger.close()
        self.db.close()

    def status(self, listed: list[str] | None = None) -> QueueRecord:
        ledger = self.ledger
        facts, silent = self.live_facts()
        heard = live_offers(self.db)  # (judged by all heard from; shown: those with facts)
        live = set((facts or {}).get("managers") or ())
        offers = {manager: said for manager, said in heard.items() if manager in live}
        drains = self.drains()
        reasons = self.unmet(heard, offers, draining={d["id"] for d in drains})
        if silent:
            by_id = {m["id"]: m for m in silent}
            held = self.db.run(managers_sql.CLAIMS_OF, owners=list(by_id))
            for name, owner, state in held:
                quiet = by_id[owner]
                doing = "running" if state == State.RUNNING else "claimed"
                reasons[name] = (
                    f"{doing}, held by a silent manager {owner} (not heard from for "
                    f"{human(quiet['heard_seconds'])}): back in line once it has been silent "
                    f"for its lease ({human(quiet['lease_seconds'])}) of a working database"
                )
        return QueueRecord(
            self.where,
            ledger.rows(),
            facts,
            reasons=reasons,
            paused_since=ledger.paused_since(),
            held=(facts or {}).get("held"),
            # a running item whose manager is gone runs again once its claim runs out
            work_outlives_manager=False,
            silent_managers=silent,
            draining_managers=drains,
            manager_offers=offers,
        )

    def unmet(self, heard: dict[str, dict], offers: dict[str, dict],
              draining: set[str]) -> dict[str, str]:  # fmt: skip
        """name -> why, for each waiting item whose need none of the managers `heard` from
        and not `draining` offers (named by the live ones', `offers`) - it waits for a
        manager that does."""
        taking = {manager: said for manager, said in heard.items() if manager not in draining}
        unmet = unmet_ids(self.db, taking)
        if not unmet:
            return {}
        named = sorted(manager for manager in offers if manager not in draining)
        said = f"none of {', '.join(named)} does" if named else "none heard from"
        drained = sorted(manager for manager in offers if manager in draining)
        if drained:  # (whatever they offer: they take nothing new)
            said += f"; {', '.join(drained)} {'is' if len(drained) == 1 else 'are'} draining"
        return {name: f"waiting for a manager that offers {text} ({said})"
                for name, text in self.db.run(placement_sql.UNMET,
                                              needs=sorted(unmet))}  # fmt: skip

    def drains(self) -> list[dict]:
        """Each manager asked to drain: {id, since_seconds, holding} - drained once it holds
        nothing."""
        return [
            {"id": manager, "since_seconds": round(max(0.0, float(since)), 1),
             "holding": int(holding)}
            for manager, since, holding in self.db.run(managers_sql.DRAINS)
        ]  # fmt: skip

    def drain(self, manager: str, *, undo: bool = False) -> str:
        """`workqueue drain MANAGER`: the manager takes nothing new from now on - its claim
        statements check (`statements.UNDRAINED`) - runs what it holds to the end, and the
        others take the rest; it stays drained across its restarts until `--undo`."""
        from ..fleet import schema

        if schema.version_of(self.db) == 0:
            schema.check(self.db)  # "no queue here", in its words: there is no manager to drain
        self._writable()  # (a ledger of an older version gains its drains table)
        drained = {d["id"] for d in self.drains()}
        known = [row[0] for row in self.db.run(managers_sql.MANAGERS)]
        if undo:
            if manager not in drained:
                if manager not in known:  # a typo: nothing to undo, and no such manager
                    said = ", ".join(sorted(drained)) or "none"
                    raise UserError(f"no manager {manager!r} in {self.where} is draining "
                                    f"(draining: {said})")  # fmt: skip
                return f"{self.where}: manager {manager} was not draining"
            self.db.run(managers_sql.UNDRAIN, manager=manager)
            self.db.run(sql.NOTIFY_LINE)  # it may claim at once: wake it
            return f"{self.where}: manager {manager} takes work again"
        if manager in drained:
            return f"{self.where}: manager {manager} is draining already"
        self.db.run(managers_sql.DRAIN, manager=manager)
        if manager not in known:  # stopped (or not started yet): drained ahead of its start
            running = ", ".join(sorted(known)) or "none"
            return (f"{self.where}: manager {manager} is not running now (running: {running}): "
                    "drained ahead of its start - it will take nothing new (its id is its "
                    f"state directory's manager-id; workqueue drain --undo {manager} takes "
                    "this back)")  # fmt: skip
        return (f"{self.where}: manager {manager} is draining: it takes nothing new, finishes "
                f"what it holds, and the other managers take the rest (workqueue drain --undo "
                f"{manager} to give it work again)")  # fmt: skip

    def live_facts(self) -> tuple[dict | None, list[dict]]:
        """The facts of the managers heard from within their lease, and the silent ones
        (see the module docstring)."""
        asked = self.ledger.wanted_parallelism()  # (the ledger first: its schema checked)
        live, silent = [], []
        for manager, facts, lease, heard in self.db.run(managers_sql.MANAGERS):
            heard = max(0.0, float(heard))
            if heard > lease / 2:
                silent.append({"id": manager, "heard_seconds": round(heard, 1),
                               "lease_seconds": lease})  # fmt: skip
            if heard <= lease and facts is not None:
                live.append((manager, facts))
        if not live:
            return None, silent
        facts = dict(live[0][1])
        draining = {d["id"] for d in self.drains()}
        if asked is None and (len(live) > 1 or draining):
            # each runs its own --parallelism: the queue's is their sum (an asked one is the
            # whole queue's already, and every manager's facts say it) - but a drained one's,
            # whose slots take nothing new
            facts["parallelism"] = sum(int(f.get("parallelism") or 0) for m, f in live
                                       if m not in draining)  # fmt: skip
        facts["managers"] = sorted(manager for manager, _ in live)
        held = [f.get("held") for _, f in live if f.get("held")]
        if held:
            facts["held"] = held[0]
        return facts, silent

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

    def controls(self, *, change: bool) -> PostgresLedger | None:
        """The ledger (the queue's settings row every manager reads): made for a change when
        the database has none yet; None for a read where there is no queue."""
        if change:
            return self._writable()
        return self._if_any(lambda ledger: ledger, None)

    def autoscaled(self) -> bool:
        facts = self._if_any(lambda ledger: self.live_facts()[0], None)
        return bool(facts and facts.get("autoscale"))
