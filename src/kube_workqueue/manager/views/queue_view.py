"""Where every item is, why, and when the waiting ones will run: the one answer behind
`workqueue status` (text and `--json`) and the manager's dashboard.

A backend hands over its rows (`manager.ports.Row`) and what it knows of the manager running
the queue (`Context`: the parallelism in force, the retry policy); this module turns them into
a `QueueView` - counts by state, one `ItemView` per item with its reason in words (made in
`item_view.py`), and a `Forecast` - the same way for every backend and every reader.

The prediction is the mean-value schedule of the line as it stands (`schedule.py`): each
item's position in the line, its predicted start (`eta_seconds`) and the forecast's
`drain_seconds`. Items arriving later are not in it - the forecast's `utilization` and
`verdict` (from the measured interarrival, `manager.planning.scaling`) say whether the line
will grow.
Without a manager running, or before any service time is measured, there is no schedule: the
reasons say so and the numbers are null, never a made-up 0.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from ..items import QueueRecord
from ..planning.measure import Measured, measure_rows
from ..planning.scaling import recommended_parallelism, verdict_for
from ..ports import Row, State
from ..priority_rules import Rules
from ..tenancy.rules import TenancyOptions
from .groups_view import group_facts, record_gate
from .item_view import Context, ItemView, iso, item_view, rounded
from .schedule import line_of, schedule

STATES = tuple(s.value for s in State)


def context_from_facts(facts: dict | None, now: float) -> Context:
    """The context of a queue whose running manager left `facts` (`Asked.facts`), or of a
    queue no manager runs (None)."""
    if not facts:
        return Context(now=now)
    from ..retry import Backoff, RetryPolicy

    try:
        policy = RetryPolicy(
            int(facts["max_attempts"]),
            Backoff(float(facts["retry_backoff"]), float(facts["retry_backoff_cap"])),
        )
        return Context(
            now=now,
            parallelism=int(facts["parallelism"]),
            policy=policy,
            paused_since=facts.get("paused_since"),
            target_utilization=float(facts.get("target_utilization", 0.9)),
            window=float(facts.get("window", 3600.0)),
            removals_held=facts.get("removals_held") or None,
            withheld=frozenset(
                n for n in facts.get("removals_held_names") or () if isinstance(n, str)
            ),  # fmt: skip
            tenancy=TenancyOptions.from_facts(facts["tenancy"]) if facts.get("tenancy") else None,
        )
    except (KeyError, TypeError, ValueError):
        return Context(now=now)  # facts from another version: no schedule rather than a wrong one


@dataclass(frozen=True)
class Forecast:
    drain_seconds: float | None
    utilization: float | None
    verdict: str | None
    recommended_parallelism: int | None
    service_seconds: float | None
    interarrival_seconds: float | None
    parallelism: int | None

    def as_json(self) -> dict:
        return {
            "drain_seconds": rounded(self.drain_seconds),
            "utilization": rounded(self.utilization, 4),
            "verdict": self.verdict,
            "recommended_parallelism": self.recommended_parallelism,
            "service_seconds": rounded(self.service_seconds),
            "interarrival_seconds": rounded(self.interarrival_seconds),
            "parallelism": self.parallelism,
        }


@dataclass
class QueueView:
    where: str
    now: float
    counts: dict[str, int]
    items: list[ItemView]
    forecast: Forecast
    paused_since: float | None = None
    held: str | None = None  # why the running manager holds dispatch (a full disk)
    removals_held: str | None = None  # why it holds cancels (a source suddenly emptied)
    extra: dict = field(default_factory=dict)  # backend-specific facts (e.g. `manager`)
    details: dict = field(default_factory=dict)  # name -> what `status NAME` adds (a pod)

    def in_state(self, state: str) -> list[ItemView]:
        return [i for i in self.items if i.state == state]

    def waiting(self) -> list[ItemView]:
        """Items in line, by position."""
        return sorted((i for i in self.items if i.position is not None), key=lambda i: i.position)

    def as_json(self, waiting: int | None = None) -> dict:
        """The view as `status --json` prints it; with `waiting`, only the first `waiting`
        items in line among the items (the others counted in `items_left_out`)."""
        items = self.items
        left_out = {}
        if waiting is not None:
            line = [i for i in items if i.position is not None]
            if len(line) > waiting:
                kept = {id(i) for i in sorted(line, key=lambda i: i.position)[:waiting]}
                items = [i for i in items if i.position is None or id(i) in kept]
                left_out = {"items_left_out": len(line) - waiting}
        return {
            "where": self.where,
            "generated": iso(self.now),
            "counts": dict(self.counts),
            "items": [i.as_json() for i in items],
            **left_out,
            "forecast": self.forecast.as_json(),
            "paused_since": iso(self.paused_since),
            "held": self.held,
            "removals_held": self.removals_held,
            **self.extra,
        }


def pending_rows(
    names: Iterable[str], now: float, priority_of: Callable[[str], int] = lambda name: 0
) -> list[Row]:
    """Rows for items a source lists that the record has never seen: pending since now."""
    return [
        Row(n, State.PENDING.value, 0, now, None, None, None, None, None, None, priority_of(n))
        for n in names
    ]


def from_record(
    record: QueueRecord,
    now: float,
    listed: list[str] | None = None,
    listed_priorities: dict[str, int] | None = None,
) -> QueueView:
    """The view of what a backend's record says (`workqueue status`); names `listed` by the
    source that the record has not seen are pending, with the priority the manager would give
    them: its rules (in its facts) first, then the listing's `listed_priorities`."""
    known = {r.name for r in record.rows}
    left = (record.facts or {}).get("priorities")
    rules = Rules(
        (glob, n)
        for glob, n in (
            r
            for r in (left if isinstance(left, list) else [])
            if isinstance(r, list) and len(r) == 2
        )  # fmt: skip
        if isinstance(glob, str) and isinstance(n, int)
    )  # (facts another version left, or a hand edit: what is not a rule is not one)
    ranked = listed_priorities or {}

    def priority_of(name: str) -> int:
        ruled = rules.of(name)
        return ruled if ruled is not None else ranked.get(name, 0)

    rows = record.rows + pending_rows(sorted(set(listed or ()) - known), now, priority_of)
    context = replace(
        context_from_facts(record.facts, now),
        paused_since=record.paused_since,
        arrivals_known=record.arrivals_known,
        held=record.held,
        work_outlives_manager=record.work_outlives_manager,
    )
    view = build(
        record.where,
        rows,
        context,
        reasons=record.reasons,
        manager=record.facts,
        **({"silent_managers": record.silent_managers} if record.silent_managers else {}),
        **({"draining_managers": record.draining_managers} if record.draining_managers else {}),
        **({"manager_offers": offers} if (offers := _offering(record.manager_offers)) else {}),
    )
    for state, n in record.unnamed.items():
        view.counts[state] = view.counts.get(state, 0) + n
    view.details = record.details
    return view


def measured_from(rows: list[Row], context: Context) -> Measured | None:
    """The figures the forecast stands on, from the record's rows: the one definition that
    `status` and the dashboard share, so at one moment they give one answer. The window is the
    running manager's (`--scale-window`); where first-seen times are not arrivals, only the
    service times of the window ending now count."""
    if context.arrivals_known:
        return measure_rows(rows, window=context.window)
    recent = [r for r in rows if r.finished is None or r.finished >= context.now - context.window]
    return measure_rows([replace(r, first_seen=0.0) for r in recent])


def build(
    where: str,
    rows: Iterable[Row],
    context: Context,
    *,
    reasons: dict[str, str] | None = None,
    **extra,
) -> QueueView:
    """The view of a queue whose record holds `rows` (every item, any order). `reasons`
    replaces the reason of the items it names (a backend that knows better: a pod waiting
    for a node)."""
    rows = list(rows)
    now = context.now
    counts = {s: 0 for s in STATES}
    items: dict[str, ItemView] = {}
    for row in rows:
        counts[row.state] = counts.get(row.state, 0) + 1
        items[row.name] = item_view(row, context)
    measured = context.measured or measured_from(rows, context)
    service = measured.service_seconds if measured else None
    for name, reason in (reasons or {}).items():
        if name in items:
            items[name].reason = reason
    if reasons:  # a running item a backend explains has not started its work yet
        started = {n for n in reasons if n in items and items[n].state == State.RUNNING}
        context = replace(context, not_started=context.not_started | started)
    group_limit = group_rate = None
    if context.tenancy:
        extra["groups"], group_limit, group_rate = _tenants(rows, items, context)
    line = [n for n in line_of(rows, items) if n not in context.withheld]  # (a hold's: no turn)
    drain = schedule(rows, line, items, context, service, group_limit, group_rate)
    return QueueView(
        where=where,
        now=now,
        counts=counts,
        items=sorted(items.values(), key=_display_order),
        forecast=_forecast(measured, context, drain),
        paused_since=context.paused_since,
        held=context.held,
        removals_held=context.removals_held,
        extra=extra,
    )


def _tenants(rows: list[Row], items: dict[str, ItemView], context: Context):
    """Each item's group, a held group's reason on its waiting items (`groups_view`); the
    per-group facts `status --json` shows as `groups`, and the schedule's `group_limit` and
    `group_rate` (None when no group has a limit, a rate)."""
    gate, groups = record_gate(context.tenancy, rows, context.now)
    for name, view in items.items():
        view.group = groups.get(name)
        if view.group is not None and view.reason == "waiting for a free slot":
            why = gate.why_held(view.group)
            if why:
                view.reason = f"waiting: {why}"

    def group_limit(name: str) -> tuple[str | None, int | None]:
        group = groups.get(name)
        return group, gate.rules.of(group)[0]

    def group_rate(name: str):
        group = groups.get(name)
        return group, gate.rules.of(group)[1], gate.token_returns(group)

    return (
        group_facts(gate, groups, rows),
        group_limit if context.tenancy.limits else None,
        group_rate if context.tenancy.rates else None,
    )


def _forecast(measured: Measured | None, context: Context, drain: float | None) -> Forecast:
    service = measured.service_seconds if measured else None
    interarrival = measured.interarrival_seconds if measured else math.inf
    parallelism = context.parallelism
    utilization = verdict = recommended = None
    # Without an arrival rate (nothing new, or items that all came together: a backlog to
    # drain) there is no utilization to speak of: the drain time is the forecast.
    if service is not None and parallelism and not math.isinf(interarrival):
        utilization = service / interarrival / parallelism
        verdict = verdict_for(utilization, context.target_utilization)
        recommended = recommended_parallelism(interarrival, service, context.target_utilization)
    return Forecast(
        drain_seconds=drain,
        utilization=utilization,
        verdict=verdict,
        recommended_parallelism=recommended,
        service_seconds=service,
        interarrival_seconds=None if math.isinf(interarrival) else interarrival,
        parallelism=parallelism,
    )


def _display_order(item: ItemView):
    """Running, then the line, then failed, cancelled and succeeded newest first."""
    rank = {
        State.RUNNING: 0, State.PENDING: 1, State.FAILED: 2, State.CANCELLED: 3, State.SUCCEEDED: 4
    }  # fmt: skip
    if item.position is not None:
        return (1, item.position, item.name)
    return (rank.get(item.state, 4), -(item.since or 0), item.name)


def _offering(offers: dict[str, dict]) -> dict[str, dict]:
    """The live managers that offer anything, and what."""
    return {manager: said for manager, said in sorted(offers.items()) if said}
