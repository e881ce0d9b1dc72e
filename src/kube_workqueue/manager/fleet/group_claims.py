"""Claims under the queue's group rules: limits, rates and fair share held across every manager
of a shared ledger (a part of `ledger.PostgresLedger`, mixed in with `claims.Claims`).

Each item's group is recorded with it (the `grp` column of the items table, written when a
listing first records the name: `see`), so every manager counts the same groups whatever it
lists. A claim of a manager
with tenancy rules (`use_tenants`) does, in ONE transaction under the lock every bounded
claim takes (`claims.QUEUE_LIMIT_LOCK`: the claims of every manager, one at a time):

    GROUP_CLAIMED   what each group holds now - claimed or running, every manager's
    GROUP_STARTS    each rated group's starts within its longest period (`group_starts`)
    GROUP_HEADS     the first few free items of each group not held (a window per group)
    choose          THE line's ordering function (`manager.tenancy.line.Grouped`) over
                    those heads, asking a gate seeded with the counts above: the same choice
                    a manager alone on its queue makes, limits and rates included
    CLAIM_NAMED     the chosen ones taken (SKIP LOCKED: a rival's unbounded claim wins ties)
    NOTE_STARTS     each rated group's new claims noted as starts

so no group ever holds more claims than its limit, and no period more starts than its rate,
across the whole fleet. A claim is a start here: one let go unstarted (a slot that closed)
still spent its token - never more starts than the rate, sometimes fewer. The asked
parallelism still bounds the whole (`claims.Claims.claim`), inside the same transaction.

Cost: the heads read every free item's index entry once (a window over the line): a claim is
O(waiting items), against O(claimed) without groups - measured in `bench/fairness.py`.
"""

from __future__ import annotations

from collections import Counter

from ..tenancy.gate import GroupGate, returns_after
from ..tenancy.line import Grouped
from .statements import FREE, UNDRAINED, Statement

GROUP_CLAIMED = Statement(
    "group_claimed",
    "SELECT grp, count(*) FROM items WHERE owner IS NOT NULL AND grp IS NOT NULL GROUP BY grp",
    hot=True,
)
# (statement_timestamp(), not clock_timestamp(): a stable time the index can be searched with)
GROUP_STARTS = Statement(
    "group_starts",
    "SELECT grp, extract(epoch FROM statement_timestamp() - at) FROM group_starts "
    "WHERE at > statement_timestamp() - make_interval(secs => %(longest)s)",
    hot=True,
)
GROUP_HEADS = Statement(
    "group_heads",
    "SELECT name, grp, priority FROM (SELECT name, grp, priority, seq, row_number() OVER "
    "(PARTITION BY grp ORDER BY priority DESC, seq) AS nth FROM items WHERE " + FREE + " "
    "AND NOT (coalesce(grp, '') = ANY(%(held)s))) heads WHERE nth <= %(each)s "
    "ORDER BY priority DESC, seq",
    hot=True,
)
CLAIM_NAMED = Statement(
    "claim_named",
    "WITH me AS (SELECT id FROM managers WHERE id = %(owner)s FOR SHARE), "
    "picked AS (SELECT name FROM items WHERE name = ANY(%(names)s) AND " + FREE + " "
    "AND " + UNDRAINED + " "
    "AND EXISTS (SELECT 1 FROM me) FOR UPDATE SKIP LOCKED), "
    "taken AS (UPDATE items SET owner = %(owner)s, changed = pg_current_xact_id() FROM picked "
    "WHERE items.name = picked.name RETURNING items.name, state, attempts, version, priority) "
    "SELECT 'taken', name, state, attempts, version, priority FROM taken "
    "UNION ALL SELECT 'unknown', NULL, NULL, NULL, NULL, NULL WHERE NOT EXISTS (SELECT 1 FROM me)",
    hot=True,
)
NOTE_STARTS = Statement(
    "note_starts",
    "INSERT INTO group_starts (grp, at) SELECT unnest(%(groups)s::text[]), statement_timestamp()",
)
FORGET_STARTS = Statement(
    "forget_starts",
    "DELETE FROM group_starts "
    "WHERE at < statement_timestamp() - make_interval(secs => %(longest)s)",
)
# Groups written for items recorded before the manager had its rules (or with other ones).
REGROUP = Statement(
    "regroup",
    "UPDATE items SET grp = t.g, changed = pg_current_xact_id() FROM "
    "unnest(%(names)s::text[], %(groups)s::text[]) AS t(n, g) "
    "WHERE items.name = t.n AND items.grp IS DISTINCT FROM t.g",
)
UNFINISHED_NAMES = Statement(
    "unfinished_names", "SELECT name, grp FROM items WHERE claimable OR owner IS NOT NULL"
)


def choose(gate: GroupGate, fair: bool, heads: list[tuple], held_by: Counter,
           wanted: int) -> list[str]:  # fmt: skip
    """The names the line's ordering function takes, up to `wanted`, from `heads` (name,
    group, priority; in line order): `gate` holds what each group holds and started, and is
    told of each one taken; `held_by` is what each group holds now (fair share's measure)."""
    groups = {name: group for name, group, _ in heads}
    priorities = {name: priority for name, _, priority in heads}
    line = Grouped(groups.get, priorities.get, gate, fair=fair)
    line.seed_running(held_by)
    for name, _, _ in heads:
        line.push(name)
    chosen = []
    while len(chosen) < wanted and line:
        chosen.append(line.pop())
    return chosen


class GroupClaims:
    """The grouped claim (see the module docstring): mixed into `PostgresLedger`."""

    tenants = None  # `manager.runtime.tenants.Tenants`, given by `use_tenants`

    def use_tenants(self, tenants) -> None:
        """Claim under `tenants`' rules from now on, and record every item's group (those
        recorded already are given theirs now, for the items still to run)."""
        self.tenants = tenants
        found = self.db.run(UNFINISHED_NAMES)
        names = [name for name, group in found if tenants.group_of(name) != group]
        if names:
            self.db.count(REGROUP, names=names, groups=[tenants.group_of(n) for n in names])

    def group_of(self, name: str) -> str | None:
        return None if self.tenants is None else self.tenants.group_of(name)

    def _longest_period(self) -> float:
        """How far back a rate's starts count (`gate.returns_after` of the longest period)."""
        rates = self.tenants.options.rates
        longest = max((seconds for _, (_, seconds) in rates), default=0.0)
        return returns_after(longest) if longest else 0.0

    def _claim_grouped(self, session, turn: dict, room: int) -> list[tuple]:
        """Under the bound's lock, in the claim's transaction: the rows taken (as `CLAIM`
        gives them)."""
        held_by = Counter({group: n for group, n in session.run(GROUP_CLAIMED)})
        ages: dict[str, list[float]] = {}
        longest = self._longest_period()
        if longest:
            for group, age in session.run(GROUP_STARTS, longest=longest):
                ages.setdefault(group, []).append(float(age))
        gate = GroupGate(self.tenants.options, clock=lambda: 0.0)  # now is 0; starts ago
        gate.seed(held_by, {g: [-a for a in found] for g, found in ages.items()})
        held = sorted(g for g in set(held_by) | set(ages) if gate.held(g))
        heads = session.run(GROUP_HEADS, turn, held=held, each=room)
        chosen = choose(gate, self.tenants.fair, heads, held_by, room)
        if not chosen:
            return []
        found = session.run(CLAIM_NAMED, turn, owner=self.owner, names=chosen)
        recorded = {name: group for name, group, _ in heads}
        taken = [recorded[row[1]] for row in found if row[0] == "taken"]
        rated = [group for group in taken if group is not None and gate.rules.of(group)[1]]
        if rated:
            session.run(NOTE_STARTS, groups=rated)
            session.run(FORGET_STARTS, longest=longest)
        return found
