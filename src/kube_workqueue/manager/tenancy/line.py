"""The line of a queue with tenants: one line per group, and the next item from the best group
that may start one - an order of the dedup queue that holds keys (`ordering.GatedOrder`, beside
`Fifo` and `ByPriority`).

    group A  ── a1 a2 a3 … a2000         pop(): among the groups a gate does not hold (a limit
    group B  ── b1 b2                           reached, a rate spent), the best-ranked one's
    (none)   ── x1                              head - and the gate is told it started

A group's rank is the line key of its head (`ordering.line_key`: priority, then arrival), so
without fair share the line is the priority order it always was, only skipping held groups.
With fair share (`fair=True`) a group's rank is first its running items over its weight -
the group furthest below its weighted share of the running slots goes next - then its head's
priority, then how long ago the group last started an item (the least recently served first:
with one slot, or whenever shares tie, the groups take turns), then its head's arrival.
Priorities order the items within a group and break ties between groups equally served; they
never let one tenant take another's share (a tenant that wants its urgent items first gives
them a priority; one that wants a bigger share gets a weight).

Costs: a push or pop is a heap operation on its group's line and one on the heap of group
ranks (log of the number of groups), whatever the number of groups; held groups are set aside
for the moment of one pop. `__bool__` says whether an item may be handed out NOW (the queue
waits while none may, `ready_in()` seconds at most: when a rate gives a token back), `__len__`
how many wait.

Invariants (the queue's lock is held around every call, as for every strategy):
  * `_live[key]` is the live entry (-priority, arrival, key) of each waiting key and its
    group; each group's heap in `_lines` holds its live entries plus stale ones (moved keys'
    old places), skipped when they reach the top;
  * `_rank[group]` is the live rank entry of each group with waiting keys; `_heads` holds
    each of those plus stale ones (skipped, and dropped when they outnumber the live);
  * `_taken[key]` is the group of each key handed out and not yet `ended`; `_running` counts
    them per group (fair share's measure; the gate keeps its own count for limits).
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Callable, Hashable, Iterator
from itertools import count
from typing import Any

UNGROUPED = ""  # the group of items in none (a group's name is never empty)


class Grouped:
    moves = True  # a touched key may move (its priority changed): the queue calls `touch`

    def __init__(
        self,
        group_of: Callable[[Hashable], str | None],  # None: in no group
        priority_of: Callable[[Hashable], int],
        gate: Any,
        *,
        fair: bool = False,
    ) -> None:
        """`gate` answers `held(group)`, `ready_in(group)`, `weight(group)` and is told
        `took(group)` / `ended(group)` (`manager.tenancy.gate.GroupGate`)."""
        self.group_of = group_of
        self.priority_of = priority_of
        self.gate = gate
        self.fair = fair
        self._arrivals = count()
        self._live: dict[Hashable, tuple[tuple, str]] = {}
        self._lines: dict[str, list[tuple]] = {}
        self._rank: dict[str, tuple] = {}
        self._heads: list[tuple] = []
        self._taken: dict[Hashable, str] = {}
        self._running: Counter = Counter()
        self._served: dict[str, int] = {}  # fair share: each group's last start, a count
        self._starts = count()
        self._aside: list[str] = []  # the groups the last look found held
        self._found: str | None = None  # the group `__bool__` found, until anything changes

    # -- the strategy's interface (`ordering`) -----------------------------------------------

    def push(self, key: Hashable) -> None:
        self._found = None
        group = self.group_of(key) or UNGROUPED
        entry = (-self.priority_of(key), next(self._arrivals), key)
        self._live[key] = (entry, group)
        heapq.heappush(self._lines.setdefault(group, []), entry)
        ranked = self._rank.get(group)
        if ranked is None or entry[:2] < (ranked[1], ranked[3]):
            self._rerank(group)

    def touch(self, key: Hashable) -> None:
        """A waiting key added again: it moves within its group when its priority changed."""
        self._found = None
        entry, group = self._live[key]
        priority = self.priority_of(key)
        if -entry[0] != priority:
            moved = (-priority, entry[1], key)
            self._live[key] = (moved, group)
            heapq.heappush(self._lines[group], moved)
            self._rerank(group)

    def pop(self) -> Hashable:
        """The head of the best group the gate does not hold (the caller asked `bool` first:
        with none, IndexError)."""
        group, self._found = self._found, None
        if group is None or self.gate.held(group or None):  # (rules may change: scale)
            group = self._best()
        if group is None:
            raise IndexError("no group may start an item now")
        line = self._lines[group]
        while True:
            entry = heapq.heappop(line)
            key = entry[2]
            live = self._live.get(key)
            if live is not None and live[0] is entry:
                break
        del self._live[key]
        self._taken[key] = group
        self._running[group] += 1
        if self.fair:
            self._served[group] = next(self._starts)
        self.gate.took(group or None)
        self._rerank(group)
        return key

    def ended(self, key: Hashable) -> None:
        """The work of `key`, handed out by `pop`, is over: its group runs one fewer."""
        if key not in self._taken:
            return
        self._found = None
        group = self._taken.pop(key)
        if self._running[group] > 1:
            self._running[group] -= 1
        else:
            del self._running[group]
        self.gate.ended(group or None)
        if self.fair and group in self._rank:
            self._rerank(group)

    def __len__(self) -> int:
        return len(self._live)

    def __bool__(self) -> bool:
        """Whether an item may be handed out now (not merely whether one waits). The group
        found is kept for the `pop` that follows under the same lock (any change between
        forgets it)."""
        self._found = self._best() if self._live else None
        return self._found is not None

    def ready_in(self) -> float | None:
        """Seconds until a group the last look found held by its rate gets a token back
        (None: no such group - what holds them ends with a run, which wakes the queue)."""
        waits = [w for w in (self.gate.ready_in(g or None) for g in self._aside) if w is not None]
        return min(waits) if waits else None

    def __iter__(self) -> Iterator[Hashable]:
        """The waiting keys in the order they would be handed out were nothing to end or be
        held meanwhile (for views: `status` positions; not the hot path)."""
        lines = {g: sorted(entry for entry, group in self._live.values() if group == g)
                 for g in {group for _, group in self._live.values()}}  # fmt: skip
        running, served = Counter(self._running), dict(self._served)
        order = []
        heads = [(*self._rank_of(g, lines[g][0], running, served), g) for g in lines]
        heapq.heapify(heads)
        at = dict.fromkeys(lines, 0)
        simulated = count(max(served.values(), default=-1) + 1)  # after every real start
        while heads:
            group = heapq.heappop(heads)[-1]
            order.append(lines[group][at[group]][2])
            at[group] += 1
            running[group] += 1
            served[group] = next(simulated)
            if at[group] < len(lines[group]):
                rank = self._rank_of(group, lines[group][at[group]], running, served)
                heapq.heappush(heads, (*rank, group))
        return iter(order)

    def seed_running(self, running: dict) -> None:
        """Items already running per group (None: ungrouped), before any key is pushed:
        fair share counts them (a fleet's claim, choosing for the whole queue)."""
        for group, n in running.items():
            self._running[group or UNGROUPED] += n

    def group_waiting(self) -> Counter:
        """How many keys wait per group (for metrics and status)."""
        return Counter(group or None for _, group in self._live.values())

    # -- ranks ---------------------------------------------------------------------------

    def _rank_of(self, group: str, head: tuple, running: Counter, served=None) -> tuple:
        """(share, -priority, when last served, arrival): without fair share the first and
        third are 0, and the rank is the head's line key."""
        if not self.fair:
            return (0.0, head[0], 0, head[1])
        served = self._served if served is None else served
        share = running[group] / self.gate.weight(group or None)
        return (share, head[0], served.get(group, -1), head[1])

    def _rerank(self, group: str) -> None:
        """`group`'s rank entry brought up to date with its head (and share)."""
        line = self._lines.get(group)
        while line:
            key = line[0][2]
            live = self._live.get(key)
            if live is not None and live[0] is line[0]:
                break
            heapq.heappop(line)
        if not line:
            self._lines.pop(group, None)
            self._rank.pop(group, None)
            return
        entry = (*self._rank_of(group, line[0], self._running), group)
        old = self._rank.get(group)
        if old is not None and old[:-1] == entry[:-1]:
            return
        self._rank[group] = entry
        heapq.heappush(self._heads, entry)
        if len(self._heads) > 2 * len(self._rank) + 64:
            self._heads = list(self._rank.values())
            heapq.heapify(self._heads)

    def _best(self) -> str | None:
        """The best-ranked group the gate does not hold, or None (the held ones it met are
        remembered: `ready_in`). Stale rank entries met on the way are dropped."""
        heads, ranks, held = self._heads, self._rank, self.gate.held
        aside = []
        found = None
        while heads:
            entry = heads[0]
            group = entry[-1]
            if ranks.get(group) is not entry:
                heapq.heappop(heads)
                continue
            if held(group or None):
                aside.append(heapq.heappop(heads))
                continue
            found = group
            break
        for entry in aside:
            heapq.heappush(heads, entry)
        self._aside = [entry[-1] for entry in aside]
        return found
