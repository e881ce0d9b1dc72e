"""The mean-value schedule of the line: each waiting item's position and predicted start, and
when the last slot falls idle (`queue_view.build` asks for it; `status` and the dashboard show
it).

The line is the items that will run again, in dispatch order: pending ones by the line's one
ordering function (`manager.workqueue.ordering.line_key`: higher priority first, first seen
first within one - the order the dispatcher starts them in), then those backing off by the time
their backoff ends.

The schedule as it stands now: each running item frees its slot when it has run for the
measured mean service time S (or now, if it already has - and a whole S from now when its unit
of work has not started: a pod waiting for a node); each item of the line, in order, takes the
earliest free slot no sooner than it is ready, and holds it for S. An item's `eta_seconds` is
its predicted start from now; `drain_seconds` is when the last slot falls idle.

With S measured, the positions are the predicted start order: an item backing off re-enters the
line when its backoff ends, at its place by `line_key` (its arrival: the end of the backoff),
so a high-priority retry is shown starting before the lower items it will overtake (with every
priority at 0 this is the order above: what waits first, then the backoffs as they end).

Without a measured S only the items a free slot takes now have a known start (0); with no
manager, a parallelism of 0, a pause or a held dispatch nothing new starts, and there are
positions but no ETAs - never a made-up number.

Cost: one sort of the line and one heap operation per item of it (a heap of the p slots'
free times): O(n log n) for n items, never a simulation.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from typing import Protocol

from ..ports import Row, State
from ..tenancy.gate import returns_after
from ..workqueue.ordering import line_key


class Scheduled(Protocol):
    """An item's view as the schedule reads and writes it (`queue_view.ItemView`)."""

    ready_at: float | None  # read: when an item backing off may start again
    position: int | None  # written: its place in the line, from 1
    eta_seconds: float | None  # written: its predicted start, from now


class Moment(Protocol):
    """What the schedule needs of the manager running the queue (`queue_view.Context`)."""

    now: float
    parallelism: int | None
    paused_since: float | None
    held: str | None
    not_started: frozenset[str]


def line_of(rows: list[Row], items: dict[str, Scheduled]) -> list[str]:
    """The items that will run again, in dispatch order: pending by `line_key` (priority,
    then first seen; then name), then the ones backing off by the time their backoff ends
    (`ItemView.ready_at`)."""
    pending = sorted(
        (r for r in rows if r.state == State.PENDING),
        key=lambda r: (line_key(r.priority, r.first_seen), r.name),
    )
    backing_off = sorted(
        (r for r in rows if items[r.name].ready_at is not None),
        key=lambda r: (items[r.name].ready_at, r.name),
    )
    return [r.name for r in pending] + [r.name for r in backing_off]


def schedule(
    rows: list[Row],
    line: list[str],
    items: dict[str, Scheduled],
    context: Moment,
    service: float | None,
    group_limit: GroupLimit | None = None,
    group_rate: GroupRate | None = None,
) -> float | None:
    """Sets each item of `line`'s `position` always, and its `eta_seconds` when a manager runs
    and S (`service`) is measured; returns the drain time from now (None: not known).
    `group_limit(name)`: (the item's group, that group's limit or None) when the queue's
    groups have limits - a group at its limit starts its next item when one of its own ends,
    however many slots are free. `group_rate(name)`: (the item's group, its rate (N, seconds)
    or None, when each token it spent comes back) when groups have rates - a group whose N
    tokens are spent starts its next item when the first comes back."""
    for position, name in enumerate(line, start=1):
        items[name].position = position
    parallelism = context.parallelism
    if not parallelism or context.paused_since is not None or context.held is not None:
        return None  # nothing new starts (no manager, parallelism 0, paused, held): no ETAs
    now = context.now
    running = [r for r in rows if r.state == State.RUNNING]
    if service is None:
        # Only the items that a free slot takes now have a known start (and whose group is
        # not at its limit).
        free = max(parallelism - len(running), 0)
        limits = None
        if group_limit is not None or group_rate is not None:
            limits = _GroupEnds(group_limit, group_rate)
            for r in running:
                limits.ran(r.name, math.inf)
        for name in line if limits is not None else line[:free]:
            if free <= 0:
                break
            if items[name].ready_at is None or items[name].ready_at <= now:
                if limits is not None:
                    if limits.free_from(name, now) > now:
                        continue  # its group is at its limit: a free slot is not its
                    limits.ran(name, math.inf, start=now)
                    free -= 1
                items[name].eta_seconds = 0.0
        return 0.0 if not line and not running else None
    # A running item whose unit of work has not started (a backend said why: a pod waiting for
    # a node or an image) still needs a whole mean service time from now.
    waiting_to_start = context.not_started
    slots = [
        now + service if r.name in waiting_to_start else max(now, (r.started or now) + service)
        for r in running
    ]
    limits = None
    if group_limit is not None or group_rate is not None:
        limits = _GroupEnds(group_limit, group_rate)
        for r, free_at in zip(running, slots, strict=True):
            limits.ran(r.name, free_at)
    slots += [now] * max(parallelism - len(slots), 0)
    heapq.heapify(slots)
    finish = max(slots) if slots else now
    by_name = {r.name: r for r in rows}
    for position, (name, start) in enumerate(
        _start_order(line, by_name, items, slots, now, service, limits), start=1
    ):
        items[name].position = position
        items[name].eta_seconds = start - now
        finish = max(finish, start + service)
    return finish - now


def _start_order(
    line: list[str],
    rows: dict[str, Row],
    items: dict[str, Scheduled],
    slots: list[float],
    now: float,
    service: float,
    limits: _GroupEnds | None = None,
) -> list[tuple[str, float]]:
    """(name, predicted start) of each item of `line`, in the order they start: each time a
    slot frees (`slots`, a heap of free times, consumed), the item it takes is the first by
    `line_key` among those ready then - what waits, and what has ended its backoff by then
    (which re-enters the line at that moment: its arrival is the end of its backoff)."""
    ready_now: list[tuple[tuple[int, float], str]] = []  # a heap by the line's order
    later: list[tuple[float, str]] = []  # backing off past now: (ready at, name)
    for name in line:
        ready_at = items[name].ready_at
        if ready_at is None or ready_at <= now:
            arrival = rows[name].first_seen if ready_at is None else ready_at
            ready_now.append((line_key(rows[name].priority, arrival), name))
        else:
            later.append((ready_at, name))
    heapq.heapify(ready_now)
    later.sort(reverse=True)  # the soonest ready at the end: popped first
    order = []
    while ready_now or later:
        free_at = heapq.heappop(slots)
        if not ready_now:  # the slot idles until the next backoff ends
            free_at = max(free_at, later[-1][0])
        while later and later[-1][0] <= free_at:
            ready_at, name = later.pop()
            heapq.heappush(ready_now, (line_key(rows[name].priority, ready_at), name))
        if limits is None:
            _, name = heapq.heappop(ready_now)
        else:
            name, free_at = limits.first_free(ready_now, free_at, later)
            if name is None:  # every ready group at its limit until a later backoff
                heapq.heappush(slots, free_at)
                continue
            limits.ran(name, free_at + service, start=free_at)
        order.append((name, free_at))
        heapq.heappush(slots, free_at + service)
    return order


GroupLimit = Callable[[str], tuple[str | None, int | None]]
GroupRate = Callable[[str], tuple[str | None, tuple[int, float] | None, list[float]]]


class _GroupEnds:
    """When each limited group's runs end, and when each rated group's spent tokens come
    back, for the schedule: a group holds its next item until fewer than its limit of its
    runs are still going, and until one of its rate's tokens is back."""

    def __init__(self, group_limit: GroupLimit | None, group_rate: GroupRate | None = None):
        self.group_limit = group_limit or (lambda name: (None, None))
        self.group_rate = group_rate
        self.ends: dict[str, list[float]] = {}  # a heap of end times per limited group
        self.returns: dict[str, list[float]] = {}  # a heap of token returns per rated group
        self.periods: dict[str, float] = {}

    def ran(self, name: str, end: float, *, start: float | None = None) -> None:
        """`name` runs until `end`; started at `start` (None: before now - its token is in
        what `group_rate` said)."""
        group, limit = self.group_limit(name)
        if group is not None and limit is not None:
            heapq.heappush(self.ends.setdefault(group, []), end)
        if start is not None and self.group_rate is not None:
            group, rate, _ = self._rate(name)
            if group is not None and rate is not None:
                heapq.heappush(self.returns[group], start + returns_after(rate[1]))

    def _rate(self, name: str):
        group, rate, spent = self.group_rate(name)
        if group is not None and rate is not None and group not in self.returns:
            self.returns[group] = sorted(spent)
        return group, rate, spent

    def free_from(self, name: str, at: float) -> float:
        """The earliest moment from `at` that `name`'s group may start it (inf: never)."""
        free = at
        group, limit = self.group_limit(name)
        if group is not None and limit is not None:
            if limit == 0:
                return math.inf
            ends = self.ends.get(group, [])
            while ends and ends[0] <= at:
                heapq.heappop(ends)
            if len(ends) >= limit:
                free = heapq.nsmallest(len(ends) - limit + 1, ends)[-1]
        if self.group_rate is not None:
            group, rate, _ = self._rate(name)
            if group is not None and rate is not None:
                returns = self.returns[group]
                while returns and returns[0] <= at:
                    heapq.heappop(returns)
                if len(returns) >= rate[0]:
                    free = max(free, heapq.nsmallest(len(returns) - rate[0] + 1, returns)[-1])
        return free

    def first_free(self, ready: list, at: float, later: list) -> tuple[str | None, float]:
        """The first ready item (by the line's order) whose group may start it at `at`,
        taken out of `ready`; else (None, when the slot should look again)."""
        aside, soonest = [], math.inf
        found = None
        while ready:
            entry = heapq.heappop(ready)
            free = self.free_from(entry[1], at)
            if free <= at:
                found = entry[1]
                break
            aside.append(entry)
            soonest = min(soonest, free)
        for entry in aside:
            heapq.heappush(ready, entry)
        if found is not None:
            return found, at
        if later:
            soonest = min(soonest, later[-1][0])
        return None, soonest
