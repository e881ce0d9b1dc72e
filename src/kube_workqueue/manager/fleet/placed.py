"""Placement in the shared ledger: which items this manager may claim - a part of
`ledger.PostgresLedger` (a mixin over its state: `db`, `placement`, `_writes`).

    offers    this manager's attributes (`--offers`), written with its managers row at every
              registration (`manager_statements.REGISTER`) - what `status` shows and judges by
    needs     an item's need (`--needs GLOB=NEED`, `manager.placement`; where no rule
              matches and `--needs-from-data`, its data's `needs`) is recorded with it, as the
              id of its text in the `needs` table - interned once by whichever manager meets
              it first (`INTERN_NEED`), cached here
    spill     `--prefers NEED --spill-after D`: a manager whose offers do not meet the
              preference takes an item only once it has waited D in line - the preferred
              managers have it first, and what they have no slot for spills over
    may       the ids of the needs this manager's offers meet: every claim statement takes
              only items with no need or one of these (`statements.FREE`'s `{may}`, one bit
              per need). The new ones are read when the queue's settings (read at most every
              `SETTINGS_SECONDS`) count more needs than it judged; a need recorded meanwhile
              is simply not yet among them - an item is never taken by a manager that has
              not judged its need
    unmet     a waiting item whose need no live manager meets is out of the line (`unmet`;
              a manager asked to drain counts as none, it takes nothing new): a claim
              walks the line in order, and a backlog only an absent cluster may run
              would otherwise be walked past by every claim of every other manager (100,000
              of them made a claim 16.6 ms where it is 0.4 ms). Every manager's heartbeat
              thread settles it every `UNMET_SECONDS` (`settle_unmet`: the live managers'
              offers read, then the items of the needs none meets marked, those of the needs
              one meets unmarked), one manager at a time (a transaction-scoped advisory
              lock); a manager that judges a need it meets unmarks its items at once, under
              the same lock - so a settling that read the offers before this manager
              registered cannot mark them after it unmarked them

Invariant: `_need_ids` maps a need's text to its id (both fixed once made); `_judged` is the
ids of every need this manager has read and judged, `_needs_seen` the highest of them; `_may`
the sorted ids among them its offers meet; `_may_sql` the claim's condition made from `_may`
(a need not judged - not yet read, even with an id below `_needs_seen` - is never met).
Under `_writes`. In the ledger: an item is `unmet` only while it waits (claimable, unowned) -
a mark at most `UNMET_SECONDS` (and a lease) late either way, never taken by a claim.
"""

from __future__ import annotations

import logging
import time

from ..faults import StorageFault
from ..placement import UNREADABLE, Placement
from ..ports import DRAINED, SourceError
from . import manager_statements as managers_sql
from . import placement_statements as placement_sql
from . import statements as sql

log = logging.getLogger(__name__)
UNMET_SECONDS = 5.0  # how old the metric's count of items no live manager may run can be,
# and how often a manager settles which items are out of the line for it (`settle_unmet`)
UNMET_LOCK_KEY = 0x776F726B75  # the advisory lock of settling them ("worku")


class PlacedClaims:
    """Placement (see the module docstring): mixed into `PostgresLedger`."""

    placement: Placement | None = None
    _need_ids: dict[str, int]
    _data_needs = None  # the source an item's `needs` is read from (`read_needs_from`), or None
    _may: tuple[int, ...] = ()
    _needs_seen = 0
    _judged: frozenset[int] = frozenset()
    _may_sql = "false"  # `_may_condition`'s answer, made when needs come
    _unmet: tuple[float, dict[str, int]] = (-1e18, {})
    _last_settled = -1e18  # when `settle_unmet` last ran (the heartbeat's clock)

    def place(self, placement: Placement) -> None:
        """This manager's offers and the queue's need rules (before it joins: its row is
        written with its offers)."""
        self.placement = placement
        self.liveness.offers = dict(placement.offers)

    def need_ids_of(self, names: list[str]) -> tuple[list[str], list[int | None]]:
        """The names to record now and the need id of each (None: any manager), interning
        new needs: the first rule that matches, else - with `--needs-from-data` - what its
        data says. A name whose data the source cannot give now is left out: recorded by a
        later listing, never without its need."""
        placement = self.placement
        if placement is None or not (placement.rules or self._data_needs is not None):
            return names, [None] * len(names)
        kept: list[str] = []
        found: list[int | None] = []
        for name in names:
            need = placement.need_of(name, self.group_of(name))
            try:
                text = need.text if need is not None else self._data_need_of(name)
            except SourceError as exc:
                log.warning("%s: not recorded yet, its data (its needs) not read: %s", name, exc)
                continue
            kept.append(name)
            found.append(None if text is None else self._need_id(text))
        return kept, found

    def read_needs_from(self, source) -> bool:
        """`ports.ClaimsWork.read_needs_from`: with `--needs-from-data`, the `needs` of a new
        item no rule matches comes from its data - held from the listing (`peek`), else asked
        of the source (`get_item`: an item a watch event brought carries none). Never a
        guess: an item whose data cannot be read now is not recorded without its need (the
        source's error ends the recording, which the next listing tries again)."""
        if self.placement is None or not self.placement.from_data:
            return False
        self._data_needs = source
        log.info("items' needs come from their data (needs), where no --needs rule matches")
        return True

    def _data_need_of(self, name: str) -> str | None:
        source = self._data_needs
        if source is None:
            return None
        data = source.peek(name)
        if data is None:
            data = source.get_item(name)
        said = None if data is None else data.get("needs")
        text = self.placement.data_need(said)
        if text == UNREADABLE:
            log.warning("%s: its data's needs %.80r do not parse: it waits for a manager "
                        "that offers what it needs, which none can", name, said)  # fmt: skip
        return text

    def _need_id(self, text: str) -> int:
        with self._writes:
            if text not in self._need_ids:
                self._need_ids[text] = self.db.run(placement_sql.INTERN_NEED, expr=text)[0][0]
            return self._need_ids[text]

    def _free(self) -> dict[str, str]:
        """The `{turn}`, `{may}` and `{spill}` of `statements.FREE` for this manager, now."""
        return {"turn": self._turn(), "may": self._may_condition(), "spill": self._spill()}

    def _spill(self) -> str:
        """For a manager the queue does not prefer (`--prefers`): only items that have been in
        line `--spill-after` seconds - since they were recorded, or their backoff ended - by
        the database's clock; else every item."""
        if self.placement is None or self.placement.preferred:
            return "true"
        seconds = float(self.placement.spill_after)
        return (f"greatest(listed_at, ready_at) < clock_timestamp() - "
                f"interval '{seconds:.3f} seconds'")  # fmt: skip

    def _may_condition(self) -> str:
        """Which needs this manager meets, as an SQL condition on `need` (integers only: see
        `_condition`). How many needs the queue has comes with its settings
        (`statements.SETTINGS`, read anyway): the needs themselves are read only when there
        are more than it has judged - no round trip of its own."""
        recorded = self._read_settings()[4]
        with self._writes:
            if recorded > len(self._judged):
                new = self.db.run(placement_sql.NEEDS_UNJUDGED, judged=sorted(self._judged))
                offers = self.placement.offers if self.placement is not None else {}
                met = [i for i, text in new if _meets(offers, text)]
                if met:
                    self._bring_back(met)
                self._may = tuple(sorted({*self._may, *met}))
                self._judged = self._judged | {i for i, _ in new}
                self._needs_seen = max(self._judged, default=0)
                self._may_sql = self._condition()
            return self._may_sql

    def _bring_back(self, needs: list[int]) -> None:
        """The waiting items of `needs` (ones this manager meets) back in the line, under the
        settling's lock: a settling that read the offers before this manager registered has
        committed first, or reads them after."""
        with self.db.transaction() as session:
            session.run(placement_sql.UNMET_WAIT, key=UNMET_LOCK_KEY)
            if session.count(placement_sql.MARK_MET, needs=needs):
                session.run(sql.NOTIFY_LINE)

    def settle_unmet(self) -> None:
        """Which waiting items are out of the line (see the module docstring): at most every
        `UNMET_SECONDS` of the heartbeat's clock, and only while the queue has needs; skipped
        when another manager is settling. Called by the heartbeat's thread; a database that
        does not answer is left for the next round (logged, not raised)."""
        now = self.liveness.clock()
        if now - self._last_settled < UNMET_SECONDS:
            return
        self._last_settled = now
        try:
            if not self._read_settings()[4]:  # (no needs: nothing to settle)
                return
            with self.db.transaction() as session:
                if not session.run(placement_sql.UNMET_LOCK, key=UNMET_LOCK_KEY)[0][0]:
                    return
                unmet, met = judged_needs(session)  # (by the offers of those taking work)
                out = session.count(placement_sql.MARK_UNMET, needs=sorted(unmet)) if unmet else 0
                back = session.count(placement_sql.MARK_MET, needs=met) if met else 0
                if back:
                    session.run(sql.NOTIFY_LINE)
        except StorageFault as exc:
            log.info("which items no live manager can run not settled now: %s", exc)
            return
        if out or back:
            log.info("items out of the line for a manager no live one is: %d marked, %d back",
                     out, back)  # fmt: skip

    def _condition(self) -> str:
        """`_may_condition`'s text from what was judged, made once per new need, not per claim:
        one bit per need judged, bit i set when need i is met, looked up by `get_bit` - a
        constant, however many needs, for the planner to estimate. A list of ids was estimated
        id by id against the column's statistics: 0.8 ms of planning at 500 met ids, twice the
        claim itself, paid at every claim while its limit was a parameter (custom plans; the
        limit is written in now, `statements.CLAIM_TAKES`) and still at each new statement's
        first plans. CASE keeps `get_bit` from a need newer than the bits."""
        if not self._may:
            return "false"
        bits = ["0"] * (self._needs_seen + 1)
        for need in self._may:
            bits[need] = "1"
        return (f"CASE WHEN need <= {int(self._needs_seen)} "
                f"THEN get_bit(B'{''.join(bits)}'::varbit, need) = 1 END")  # fmt: skip

    def needs_left(self, names: list[str]) -> dict[str, tuple[str, str]]:
        """Of `names`, each that waits with a need or runs elsewhere: (its need, who will run
        it - "me": this manager, "others": another live one that takes new items and offers
        it, "none": no live manager; ("", "running") for one another manager holds). Judged
        now against the live managers' offers, not by the `unmet` mark (which a settling
        makes up to UNMET_SECONDS late). What a `--once` run asks while it waits
        (`runtime.cannot_finish`)."""
        drained = bool(self.db.run(managers_sql.IS_DRAINED, owner=self.owner)[0][0])
        if not names or not drained and not self._read_settings()[4]:  # (no need recorded)
            return {}
        rows = self.db.run(placement_sql.NEEDS_LEFT, names=names)
        if not rows and not drained:
            return {}
        live = live_offers(self.db, taking=True)  # (a drained one takes nothing new)
        found = {}
        for name, need, owner in rows:
            if owner is not None:
                found[name] = ("", "me" if owner == self.owner else "running")
            elif self.owner in live and _meets(live[self.owner], need):
                found[name] = (need, "me")
            elif any(_meets(offers, need) for holder, offers in live.items()
                     if holder != self.owner):  # fmt: skip
                found[name] = (need, "others")
            else:
                found[name] = (need, "none")
        if drained:  # what needs nothing waits for another manager that takes new items
            others = "others" if any(owner != self.owner for owner in live) else "none"
            for name in names:
                found.setdefault(name, (DRAINED, others))
        return found

    def unmet_needs(self) -> dict[str, int]:
        """need -> waiting items with it, for each need no live manager's offers meet (the
        `workqueue_items_unmet` metric); read at most every `UNMET_SECONDS`, and the last
        answer kept while the database does not give one."""
        at, found = self._unmet
        if time.monotonic() - at < UNMET_SECONDS:
            return found
        try:
            found = unmet_counts(self.db)
        except StorageFault:
            pass
        self._unmet = (time.monotonic(), found)
        return found


def live_offers(db, *, taking: bool = False) -> dict[str, dict[str, str]]:
    """manager -> offers, of each manager heard from within its lease - with `taking`, of
    those among them that take new items: a manager asked to drain runs nothing new, so a
    need only it meets waits for a manager that does, as if it were gone."""
    return {manager: dict(offers or {})
            for manager, offers, draining in db.run(placement_sql.LIVE_OFFERS)
            if not (taking and draining)}  # fmt: skip


def unmet_ids(db, live: dict[str, dict[str, str]] | None = None) -> dict[int, str]:
    """id -> text of each need none of the `live` managers' offers meet (read when not
    given: `live_offers` of those taking new items)."""
    return judged_needs(db, live)[0]


def judged_needs(db, live: dict[str, dict[str, str]] | None = None):
    """Every need, judged against the `live` managers' offers (read when not given, of those
    taking new items): (id -> text of each none meets, [id of each one meets])."""
    offered = (live_offers(db, taking=True) if live is None else live).values()
    unmet: dict[int, str] = {}
    met: list[int] = []
    for need, text in db.run(placement_sql.NEEDS):
        if any(_meets(offers, text) for offers in offered):
            met.append(need)
        else:
            unmet[need] = text
    return unmet, met


def unmet_counts(db) -> dict[str, int]:
    unmet = unmet_ids(db)
    if not unmet:
        return {}
    return dict(db.run(placement_sql.UNMET_COUNTS, needs=sorted(unmet)))


def _meets(offers: dict[str, str], text: str) -> bool:
    return Placement(offers.items()).meets(text)
