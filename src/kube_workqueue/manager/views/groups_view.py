"""The queue's tenants in `status` and the dashboard: each item's group, why a waiting one is
held, and per group what waits and runs - read from the record, so every reader says the same.

The manager leaves its tenancy rules in its facts (`TenancyOptions.facts`, with the limits and
rates in force after any `workqueue scale --limit/--rate`). From them and the rows:

    group      the `--group` pattern's first capture on the name (a group the source gave in
               its data is known to the manager only: the record keeps names, not data)
    running    the group's running rows
    rate       the group's starts within its period: the rows' start times (each item's last
               start: a retried item's earlier start has been written over - the manager, which
               counts every start, may hold a group a little longer than this view says)

A waiting item whose group is held says so ("waiting: group acme at its limit 2/2"), in place
of "waiting for a free slot". The gate that says it is the manager's own
(`manager.tenancy.gate.GroupGate`), fed the record's counts on the wall clock.
"""

from __future__ import annotations

from collections import Counter

from ..ports import Row, State
from ..tenancy.gate import GroupGate
from ..tenancy.rules import Grouping, TenancyOptions


def record_gate(options: TenancyOptions, rows: list[Row], now: float) -> tuple[GroupGate, dict]:
    """(a gate holding what `rows` say each group runs and started, name -> group)."""
    grouping = Grouping(options.group)
    groups = {row.name: grouping.of(row.name) for row in rows}
    gate = GroupGate(options, clock=lambda: now)
    running: Counter[str] = Counter()
    starts: dict[str, list[float]] = {}
    for row in rows:
        group = groups[row.name]
        if group is None:
            continue
        if row.state == State.RUNNING:
            running[group] += 1
        if row.started:
            starts.setdefault(group, []).append(row.started)
    gate.seed(running, starts)
    return gate, groups


def group_facts(gate: GroupGate, groups: dict[str, str | None], rows: list[Row]) -> dict:
    """Per group: waiting, running, limit, rate, and why it is held (None: it is not)."""
    waiting = Counter(groups[r.name] for r in rows if r.state == State.PENDING)
    running = Counter(groups[r.name] for r in rows if r.state == State.RUNNING)
    return {
        group: gate.facts(group, waiting=waiting[group], running=running[group])
        for group in sorted({g for g in waiting | running if g is not None})
    }
