"""Each item's priority: the manager's rules first, then what the source says, else 0.

    --priority 'urgent/*=100' --priority '*.mov=-5'      (repeatable; the first match wins)

An item's priority is an integer, higher first, first come first served within one priority
(`manager.workqueue.ordering`). It comes from, in this order:

  1. the first of the manager's rules (`--priority GLOB=N`, shell-style globs matched against
     the whole item name: `*` crosses `/`) that matches the name - the operator's word wins;
  2. the source's, where the source can say: a Redis sorted set's score, or an item data
     field `priority` (`ItemList.priorities` in a listing, `data.priority` in the full view);
  3. otherwise 0.

`Prioritizer.listed(names)` runs on every listing over the items that wait for work: it records
in the ledger the priorities that changed (so `status` in another process orders the line as
this manager does) and tells the line to move those items. It costs nothing until the first
rule or ranked item: the line stays a FIFO (~50 bytes a waiting item) until then, and becomes a
priority order (`ByPriority`, ~180 bytes a waiting item) from then on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from ..ports import ItemLedger, RanksItems, Source
from ..priority_rules import Rules
from ..workqueue.ordering import ByPriority

log = logging.getLogger(__name__)


class Prioritizer:
    def __init__(self, rules: Rules, source: Source, ledger: ItemLedger, line, *,
                 ordered: bool = False) -> None:  # fmt: skip
        """`line` is the manager's workqueue (`use_order`, `touch`), or None when the ledger
        orders the line itself (a fleet's claims: `modes.Fleet`) - priorities are recorded
        all the same. `ordered`: the line orders by priority already (a grouped line)."""
        self.rules = rules
        self.source = source
        self.ledger = ledger
        self.line = line
        self.ordered = ordered  # whether the line is a priority order yet

    def _listed_priorities(self) -> dict[str, int]:
        return self.source.listed_priorities() if isinstance(self.source, RanksItems) else {}

    def of(self, name: str, listed: dict[str, int]) -> int:
        ruled = self.rules.of(name)
        return ruled if ruled is not None else listed.get(name, 0)

    def listed(self, waiting: list[str]) -> None:
        """Before the items of a listing that wait for work are queued: their priorities
        recorded where they changed, and moved in the line (see the module docstring). A
        `StorageFault` propagates, as for every write of a listing."""
        listed = self._listed_priorities()
        if not self.ordered and not self.rules and not listed:
            return  # nothing ranked yet: the line stays a FIFO, at no cost
        self._order_the_line()
        known: Callable[[str], int] = self.ledger.priority
        changes = {}
        for name in waiting:
            priority = self.of(name, listed)
            if priority != known(name):
                changes[name] = priority
        if changes:
            self.ledger.prioritize(changes)
            if self.line is not None:
                for name in changes:
                    self.line.touch(name)

    def _order_the_line(self) -> None:
        if not self.ordered:
            if self.line is not None:
                self.line.use_order(lambda waiting: ByPriority.after(waiting, self.ledger.priority))
            self.ordered = True
            log.info("the line is ordered by priority from now on")
