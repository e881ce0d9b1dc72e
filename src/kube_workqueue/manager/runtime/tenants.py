"""A queue's tenants, held by the manager: each item's group, and the gate its line asks.

    --group '^([^/]+)/' --limit '*=3' --rate 'acme=100/1m' --fair --weight 'gold-*=2'

`Tenants` is made once per manager from `ManagerOptions.tenancy` (nothing at all when no flag
asks for it: the line stays a FIFO or a priority order at no cost). It gives:

    order(priority_of)   the line's strategy for a manager alone on its queue: one line per
                         group (`manager.tenancy.line.Grouped`), asking the gate; a fleet
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

from ..ports import GroupsItems
from ..tenancy.gate import GroupGate
from ..tenancy.line import Grouped
from ..tenancy.rules import Grouping, TenancyOptions, rule_texts
from .modes import WakesWaiters

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
        if isinstance(line, WakesWaiters):
            self._poke = line.poke

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
            said = rule_texts(now.limits, now.rates)
            log.info("group limits now %s; rates %s", ", ".join(said["limits"]) or "none",
                     ", ".join(said["rates"]) or "none")  # fmt: skip
        self._poke()
        return now

    def why_held(self, name: str) -> str | None:
        return self.gate.why_held(self.group_of(name))

    def groups(self) -> dict[str, dict]:
        """Per group seen: waiting (in this manager's line), running, started, limit, rate,
        weight, and why it is held (None when it is not)."""
        running, started = self.gate.counts()
        waiting = self._line.group_waiting() if self._line is not None else {}
        seen = {g for g in (*running, *started, *waiting) if g is not None}
        return {
            group: {**self.gate.facts(group, waiting=waiting.get(group, 0),
                                      running=running.get(group, 0)),
                    "started": started.get(group, 0)}
            for group in sorted(seen)
        }  # fmt: skip


def listed_groups_of(source) -> Callable[[], dict] | None:
    """The source's `listed_groups` (its items' data groups), where it has them."""
    return source.listed_groups if isinstance(source, GroupsItems) else None


def tenants_for(options: TenancyOptions, source) -> Tenants | None:
    """The manager's tenants, or None when no tenancy flag was given."""
    if not options:
        return None
    return Tenants(options, listed_groups_of(source))
