"""The claim side of the shared ledger: how a manager takes items from the one line, holds them
while it lives, and lets them go - a part of `ledger.PostgresLedger` (a mixin over its state:
`db`, `owner`, `liveness`, `_writes` and the memory whose invariants are written there).

    claim(n)     up to n items from the head of the line - claimable, unowned, ready, by
                 priority then arrival - in one statement, `FOR UPDATE SKIP LOCKED`: rows
                 another manager's claim is taking are passed over, never waited for and never
                 given twice. The caller asks for no more than its free slots. A claim that
                 comes back empty although its snapshot saw free items was refused (every one
                 of them was being taken by a rival at that instant): counted
    turns        for `TURN_SECONDS` a new item is only the claim of the live manager whose
                 turn its name's hash gives: managers woken together by one notification do
                 not all reach for the same item (`first_to_answer`)
    release      a claim that did not start goes back (after a retry's backoff), or is parked
                 out of the line (the source did not have it) until a listing brings it again
    drain        a manager asked to drain (`workqueue drain`: its id in `drains`) takes
                 nothing: the claim statement itself checks, so no claim that begins after
                 the drain is written takes an item; what it holds it runs to the end
    liveness     a claim lives while its owner's heartbeat does (`liveness.py`): nothing per
                 row is renewed; a dead manager's items are let go by the others
    with a finish  a slot's next item is claimed in its finish's statement
                 (`FINISH_AND_CLAIM`, `claim_with_finishes`) where a claim alone would take no
                 lock - no parallelism asked, no groups: a round trip saved an item
    a bound      a parallelism asked of the queue bounds every manager's claims together;
                 so do the queue's group limits and rates (`group_claims.py`), under one lock
    doubt        a write whose answer was lost (the connection died mid-statement) may or may
                 not have happened: `settle_doubts` lets go of whatever this manager holds
                 without knowing it (a claim back in line, a start undone), and a finish is
                 written again with the same time, which its `FINISHED_ALREADY` check
                 recognises as done
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from ..faults import StorageFault
from ..ports import State
from . import statements as sql
from .notifier import Notifier

log = logging.getLogger(__name__)

# A new item is, for its first TURN_SECONDS, only the claim of the live manager whose turn its
# name gives (its hash mod the live managers): the others leave it alone, so managers
# woken together do not all race for it. Afterwards (that manager's slots were full) anyone's.
TURN_SECONDS = 0.25
SETTINGS_SECONDS = 0.5  # how stale the pause, the asked parallelism, others' count may be
QUEUE_LIMIT_LOCK = 0x776F726B72  # the advisory lock claims take under an asked parallelism


class Claims:
    """Claims (see the module docstring): mixed into `PostgresLedger`."""

    def parked(self, name: str) -> bool:
        """Whether `name` waits outside the line (it was gone from the source when claimed)."""
        return name in self._parked

    def claim(self, limit: int) -> list[str]:
        """Up to `limit` items from the head of the line, now this manager's (see the module
        docstring); [] when none is free. Once a parallelism is asked of the queue, it bounds
        the claims of every manager together: the claim counts the claims held, under a lock
        every manager's claims take in turn, and takes only what is left."""
        asked = self.wanted_parallelism()
        turn = self._free()  # (`placed`: the turn, and the needs this manager meets)
        with self._writes:
            try:
                if asked is None and self.tenants is None:
                    found = self.db.run(sql.CLAIM, sql.claim_format(turn, limit), owner=self.owner)
                else:
                    with self.db.transaction() as session:
                        session.run(sql.BOUND_LOCK, key=QUEUE_LIMIT_LOCK)
                        room = limit
                        if asked is not None:
                            room = min(limit, asked - session.run(sql.CLAIMED_COUNT)[0][0])
                        found = []
                        if room > 0 and self.tenants is not None:  # `group_claims`
                            found = self._claim_grouped(session, turn, room)
                        elif room > 0:
                            found = session.run(sql.CLAIM, sql.claim_format(turn, room),
                                                    owner=self.owner)  # fmt: skip
            except StorageFault:
                self._in_doubt = True  # it may have claimed: `settle_doubts` lets go
                raise
            if found and found[0][0] == "refused":
                self.counters["refused"] += 1
                return []
            if found and found[0][0] == "unknown":  # declared dead: the heartbeat registers
                self.unregistered = True
                return []
            return self._hold_claimed(found)

    # -- claims made by a finish (`FINISH_AND_CLAIM`) ------------------------------------

    def claim_with_finishes(self, wanted: Callable[[], int],
                            took: Callable[[list[str]], None]) -> None:  # fmt: skip
        """Claim with each finish, in its statement, where a claim alone would take no lock
        (no asked parallelism, no groups): `wanted()` - asked by the finishing thread - says
        how many items the slots about to be taken want (0: none), `took(names)` is told what
        the finish claimed (perhaps nothing). A round trip and a transaction an item saved."""
        self._finish_claims = (wanted, took)

    def _claim_with_finish(self) -> int:
        """How many items the next finish claims (0: it only finishes)."""
        if self._finish_claims is None or self.tenants is not None:
            return 0
        if self.wanted_parallelism() is not None:  # a bounded claim counts under its lock
            return 0
        return max(0, self._finish_claims[0]())

    def _finish_and_claim(self, session, claim: int, **params) -> list[tuple]:
        """`FINISH_AND_CLAIM` (under `_writes`): the finish's row(s), as FINISH returns them;
        each item taken noted as claimed here and told to the line."""
        rows = session.run(sql.FINISH_AND_CLAIM, sql.claim_format(self._free(), claim),
                           owner=self.owner, **params)  # fmt: skip
        self._finish_claims[1](self._hold_claimed([row for row in rows if row[0] == "taken"]))
        return [row[2:] for row in rows if row[0] == "finished"]

    def _hold_claimed(self, taken: list[tuple]) -> list[str]:
        """Rows a claim took - (kind, name, state, attempts, version, priority) - noted as this
        manager's claims (the caller holds `_writes`): their names."""
        for _, name, state, attempts, version, priority in taken:
            self._note(name, state, attempts, version, priority)
            self._claimed.add(name)
        self.counters["claims"] += len(taken)
        return [row[1] for row in taken]

    def waiting(self) -> bool:
        """Whether any item is free to claim now."""
        return self.db.run(sql.WAITING, self._free(), owner=self.owner)[0][0]

    def _turn(self) -> str:
        """The condition that leaves other managers' new items alone (`TURN_SECONDS`)."""
        rank, live = self.liveness.peers
        if live <= 1:
            return "true"
        return (f"(listed_at < clock_timestamp() - interval '{TURN_SECONDS} seconds' "
                f"OR mod(hashtext(name) & 2147483647, {int(live)}) = {int(rank)})")  # fmt: skip

    def holds(self, name: str) -> bool:
        return name in self._claimed

    def holding(self) -> int:
        """How many items this manager holds now: claimed, or running here."""
        return len(self._claimed) + len(self._started)

    def release(self, name: str, *, ready_in: float = 0.0, park: bool = False) -> None:
        """Let go of a claimed item that did not start: claimable again after `ready_in`
        seconds, or (`park`: it needs no work, or was gone from the source) out of the line
        until a listing says it needs work again (`unpark`). Nothing when it is not ours."""
        with self._writes:
            with self.db.session() as session:
                released = session.count(sql.RELEASE, name=name, owner=self.owner, park=park,
                                          ready_in=ready_in) > 0  # fmt: skip
                if released and not park:
                    session.run(sql.NOTIFY_LINE)
            self._claimed.discard(name)
            if park and released:
                self._parked.add(name)

    def unpark(self, names: list[str]) -> None:
        """Listed again: back in the line."""
        with self.db.session() as session:
            session.count(sql.UNPARK, names=names, max_attempts=self.max_attempts)
            session.run(sql.NOTIFY_LINE)
        with self._lock:
            self._parked.difference_update(names)

    # -- liveness (the heartbeat's thread: `runtime.claims.Heartbeat`) --------------------

    def heartbeat_round(self) -> list[tuple[str, str]]:
        """One round of the heartbeat's thread: beat when due, look at the others (their
        dead's items let go: (item, owner) of each), settle writes whose answer was lost and
        which items wait for a manager no live one is (`placed.settle_unmet`). A
        `StorageFault` when the database does not take it."""
        if self.unregistered or self.liveness.beat_due():
            self.liveness.beat()
            self.unregistered = False
        let_go = self.liveness.sweep()
        self.counters["expired"] = self.liveness.expired
        if self._in_doubt:
            self.settle_doubts()
        self.settle_unmet()
        return let_go

    def _declared_dead(self) -> None:
        """Rivals declared this manager dead (`Liveness.on_declared_dead`): every claim it
        held is gone. Its runs are lost: their outcomes are not written, the runs still going
        are ended (`on_claims_lost`), and none of their items is claimed here again until its
        old run has ended."""
        with self._writes:
            runs, self._started = self._started, {}
            self._lost_runs.update(runs)
            claimed, self._claimed = self._claimed, set()
            self._finishing.clear()
            self._in_doubt = False  # nothing is ours any more to settle
        self.counters["lost"] += len(runs) + len(claimed)
        if runs:
            log.warning("%d run(s) of this manager lost their claims (their items run again "
                        "elsewhere); ending them: %s", len(runs),
                        ", ".join(sorted(runs)[:5]))  # fmt: skip
        if runs and self.on_claims_lost is not None:
            self.on_claims_lost(sorted(runs))

    def settle_doubts(self) -> None:
        """After a write whose answer was lost: what this manager holds without knowing it
        is let go (see the module docstring)."""
        with self._writes:
            known = sorted(self._claimed | set(self._started) | set(self._finishing))
            gone = self.db.run(sql.LET_GO_UNKNOWN, owner=self.owner, known=known)
            self._in_doubt = False
        if gone:
            log.info("%d claim(s) whose answer was lost with the connection let go: %s",
                     len(gone), ", ".join(row[0] for row in gone[:5]))  # fmt: skip
            self.db.run(sql.NOTIFY_LINE)

    def first_to_answer(self, payload: str) -> bool:
        """Whether this manager answers a notification of new items at once: whether the
        first new item (its name's hash, the payload) is its turn (`TURN_SECONDS`); the
        others look once the turn is over. A notification without a number is everyone's."""
        rank, live = self.liveness.peers
        try:
            return live <= 1 or int(payload) % live == rank
        except ValueError:
            return True

    def on_line_changed(self, callback: Callable[[str], None]) -> None:
        """Call `callback(payload)` on each notification of the line (`Notifier`)."""
        if self._notifier is None:
            self._notifier = Notifier(self.db.sibling("workqueue-listen")).start()
        self._notifier.callbacks.append(callback)

    def claim_counters(self) -> dict[str, float]:
        return dict(self.counters)

    # -- what this manager holds ----------------------------------------------------------

    def owned(self) -> list[tuple[str, str, int]]:
        """(name, state, attempts) of every item this manager holds; its running ones are
        taken as its own runs (a restart takes them back: their ends are written by it)."""
        found = self.db.run(sql.OWNED, owner=self.owner)
        with self._writes:
            for name, state, attempts in found:
                if state == State.RUNNING:
                    self._started[name] = attempts
        return found

    def release_mine(self, *, keep_running: bool = False) -> None:
        """A stopping manager lets go of what it holds: claims that did not start back in
        line; running items back to pending (their attempts not counted) - unless their work
        outlives this manager (`keep_running`: a cluster's Jobs, which the installation's next
        manager adopts). When it holds nothing more, it leaves the managers table."""
        kept = 0
        for name, state, _ in self.owned():
            if state != State.RUNNING:
                self.release(name)
            elif keep_running:
                kept += 1
            else:
                self.requeue(name)
        if not kept:
            self.liveness.leave()

    def running_rows(self) -> list[tuple[str, int, None, None]]:
        """This manager's running items (what a restart of it finds: `recovery.take_back`)."""
        return [(n, a, None, None) for n, s, a in self.owned() if s == State.RUNNING]

    def others_running(self) -> int:
        """Items other managers run now (read through the claims' index; at most
        `SETTINGS_SECONDS` old, and the last count while the database does not answer)."""
        at, count = self._others
        if time.monotonic() - at < SETTINGS_SECONDS:
            return count
        try:
            count = self.db.run(sql.OTHERS_RUNNING, owner=self.owner)[0][0]
        except StorageFault:
            pass  # dispatch is held meanwhile: the last count stands
        self._others = (time.monotonic(), count)
        return count
