"""A queue's tenants, held by the manager: each item's group, and the gate its line asks.

    --group '^([^/]+)/' --limit '*=3' --rate 'acme=100/1m' --fair --weight 'gold-*=2'

`Tenants` is made once per manager from `ManagerOptions.tenancy` (nothing at all when no flag
asks for it: the line stays a FIFO or a priority order at no cost). It gives:

    order(priority_of)   the line's strategy for a manager alone on its queue: one line per
                         group (`manager.workqueue.grouped.Grouped`), asking the gate; a fleet
                         on a shared ledger has its claims count the same rules instead
                         (`manager.fleet.claims`), the groups recorded with the items
    occupy / vacate      work adopted from a manager that died, counted against its group
    change(...)          limits or rates asked of the running queue (`workqueue scale`): in
                         force at once, the line told to look again
    why_held(name)       why an item waits although slots are free (status, the dashboard)
    groups()             per group: waiting, running, started, limit, rate (metrics, status)

The rules in force are the manager's facts (`Asked.facts`), so `status` in another process
says the same (`manager.views.queue_view`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from ..tenancy.gate import GroupGate
from ..tenancy.rules import Grouping, TenancyOptions, rate_text
from ..workqueue.grouped import Grouped

log = logging.getLogger(__name__)


class Tenants:
    def __init__(self, options: TenancyOptions, listed_groups: Callable[[], dict] | None = None):
        """`listed_groups()`: the groups the source gave with its last listing (name ->
        group), for items the `--group` pattern does not name."""
        self.grouping = Grouping(options.group, listed_groups)
        self.gate = GroupGate(options)
        self.fair = options.fair
        self._line: Grouped | None = None
        self._poke: Callable[[], None] = lambda: None
        self._running: set[str] = set()  # a fleet's: what this manager began and holds

    @property
    def options(self) -> TenancyOptions:
        return self.gate.options

    def group_of(self, name: str) -> str | None:
        return self.grouping.of(name)

    def order(self, priority_of: Callable[[str], int]) -> Grouped:
        """The line's strategy (see the module docstring): made once."""
        if self._line is None:
            self._line = Grouped(self.group_of, priority_of, self.gate, fair=self.fair)
        return self._line

    def attach(self, line) -> None:
        """`line` is the queue the order is in: told to look again when the rules change."""
        self._poke = getattr(line, "poke", self._poke)

    def occupy(self, name: str) -> None:
        self.gate.occupy(self.group_of(name))

    def started(self, name: str) -> None:
        """A fleet's manager began `name` (its line - the ledger's claims - counted it in the
        database; this count is the manager's own, for its metrics and log)."""
        if self._line is None and name not in self._running:
            self._running.add(name)
            self.gate.took(self.group_of(name))

    def ended(self, name: str) -> None:
        """A fleet's manager is done with `name` (begun or not)."""
        if name in self._running:
            self._running.discard(name)
            self.gate.ended(self.group_of(name))

    def vacate(self, name: str) -> None:
        self.gate.ended(self.group_of(name))
        self._poke()

    def change(self, *, limits=None, rates=None) -> TenancyOptions:
        """New limits or rates in force at once (a lower limit stops nothing running)."""
        before = self.gate.options
        now = self.gate.change(limits=limits, rates=rates)
        if (now.limits, now.rates) != (before.limits, before.rates):
            log.info("group limits now %s; rates %s", _rules(now.limits),
                     _rules([(g, f"{n}/{s:g}s") for g, (n, s) in now.rates]))  # fmt: skip
        self._poke()
        return now

    def why_held(self, name: str) -> str | None:
        return self.gate.why_held(self.group_of(name))

    def groups(self) -> dict[str, dict]:
        """Per group seen: waiting (in this manager's line), running, started, limit, rate,
        weight, and why it is held (None when it is not)."""
        found = self.gate.snapshot()
        waiting = self._line.group_waiting() if self._line is not None else {}
        for group, count in waiting.items():
            if group is not None:
                found.setdefault(group, {"running": 0, "started": 0, **_rules_of(self.gate, group)})
                found[group]["waiting"] = count
        for group, facts in found.items():
            facts.setdefault("waiting", 0)
            facts["held"] = self.gate.why_held(group) if facts["waiting"] else None
        return dict(sorted(found.items()))


def _rules_of(gate: GroupGate, group: str) -> dict:
    limit, rate, weight = gate.rules.of(group)
    return {"limit": limit, "rate": rate_text(rate) if rate else None, "weight": weight}


def _rules(rules: list) -> str:
    return ", ".join(f"{glob}={value}" for glob, value in rules) or "none"


def tenants_for(options: TenancyOptions, source) -> Tenants | None:
    """The manager's tenants, or None when no tenancy flag was given."""
    if not options:
        return None
    listed = getattr(source, "listed_groups", None)
    return Tenants(options, listed if callable(listed) else None)
