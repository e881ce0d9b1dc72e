"""Whether a group may start another item now: its limit and its rate, counted in one place.

The line asks `held(group)` before it hands out a group's item, and tells `took(group)` when it
does and `ended(group)` when that item's work is over (`manager.tenancy.line`); work this
manager took over from one that died (`manager.runtime.adoption`) is counted with `occupy`.

    limit N     at most N items of the group run at once: `running[group] < N`
    rate N/P    at most N starts in any P seconds: a token bucket of N tokens whose every
                token comes back P seconds after it was spent (each start's time is kept
                while it is younger than P) - unlike a bucket that refills at N/P a second,
                no window of P seconds ever holds more than N starts, bursts included. A
                token comes back a little later than P (`returns_after`: a twentieth of P, at
                most half a second): a start is counted when the manager starts the work, a
                worker marks it once its process runs, and a cold first start that took
                longer than the next must not let the worker's clock see N + 1 in a period
                (measured: 24 starts in a 10-second window of a 20/10s rate without it)

Both are the queue's: with one manager they are counted here; on a shared ledger each claim
counts them in the database under one lock (`manager.fleet.claims`), and this gate only says
why a group waits. `scale --limit/--rate` changes the rules while items wait and run: a lower
limit stops nothing running, it only holds the next start.

Invariants (under `_lock`): `running[g]` is the number of items of g taken and not ended
(never negative: an end without a take is ignored); `_starts[g]` holds the times of g's starts
younger than its rate's period, oldest first, only for groups with a rate.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, deque
from collections.abc import Callable

from .rules import GroupRules, TenancyOptions, rate_text


def returns_after(period: float) -> float:
    """When a spent token of a rate of this period comes back (see the module docstring)."""
    return period + min(0.5, period / 20)


class GroupGate:
    def __init__(self, options: TenancyOptions, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.rules = GroupRules(options)
        self._lock = threading.Lock()
        self.running: Counter[str] = Counter()
        self.started: Counter[str] = Counter()  # starts since this manager began (metrics)
        self._starts: dict[str, deque[float]] = {}

    # -- the rules, changed while running ----------------------------------------------------

    def change(self, *, limits: list | None = None, rates: list | None = None) -> TenancyOptions:
        """New limits or rates from now on (`workqueue scale --limit/--rate`): the options in
        force, returned. The caller pokes the line (a group may be free now)."""
        with self._lock:
            options = self.rules.options
            new = TenancyOptions(
                group=options.group,
                limits=list(options.limits if limits is None else limits),
                rates=list(options.rates if rates is None else rates),
                fair=options.fair,
                weights=list(options.weights),
            )
            self.rules = GroupRules(new)
            return new

    @property
    def options(self) -> TenancyOptions:
        return self.rules.options

    # -- the line's questions (cheap: asked for every item handed out) -----------------------

    def held(self, group: str | None) -> bool:
        """Whether `group` may not start another item now."""
        if group is None:
            return False
        limit, rate, _ = self.rules.of(group)
        if limit is not None and self.running[group] >= limit:
            return True
        return rate is not None and self._spent(group, rate) >= rate[0]

    def ready_in(self, group: str | None) -> float | None:
        """Seconds until a group held by its rate gets a token back; None when it is not held
        by its rate (it is free, or waits for a run to end)."""
        if group is None:
            return None
        limit, rate, _ = self.rules.of(group)
        if rate is None or (limit is not None and self.running[group] >= limit):
            return None
        with self._lock:
            starts = self._starts.get(group)
            if not starts or len(starts) < rate[0]:
                return None
            return max(0.0, starts[-rate[0]] + returns_after(rate[1]) - self.clock())

    def weight(self, group: str | None) -> float:
        return self.rules.of(group)[2]

    def took(self, group: str | None) -> None:
        """An item of `group` was handed out: it runs, and it spent a token of its rate."""
        if group is None:
            return
        with self._lock:
            self.running[group] += 1
            self.started[group] += 1
            rate = self.rules.of(group)[1]
            if rate is not None:
                self._starts.setdefault(group, deque()).append(self.clock())

    def occupy(self, group: str | None) -> None:
        """An item of `group` already running (adopted): counted against its limit only."""
        if group is not None:
            with self._lock:
                self.running[group] += 1

    def ended(self, group: str | None) -> None:
        if group is None:
            return
        with self._lock:
            if self.running[group] > 1:
                self.running[group] -= 1
            else:
                self.running.pop(group, None)

    def _spent(self, group: str, rate: tuple[int, float]) -> int:
        """The starts of `group` within its rate's period (older ones dropped)."""
        with self._lock:
            starts = self._starts.get(group)
            if not starts:
                return 0
            oldest = self.clock() - returns_after(rate[1])
            while starts and starts[0] <= oldest:
                starts.popleft()
            return len(starts)

    def seed(self, running: dict[str, int], starts: dict[str, list[float]]) -> None:
        """Counts read from a record (`manager.views.groups_view`): what each group runs,
        and its start times on this gate's clock."""
        with self._lock:
            self.running.update(running)
            for group, times in starts.items():
                if self.rules.of(group)[1] is not None:
                    self._starts[group] = deque(sorted(times))

    # -- what it says ------------------------------------------------------------------------

    def why_held(self, group: str | None) -> str | None:
        """Why `group` waits, as `status` says it; None when it does not."""
        if group is None:
            return None
        limit, rate, _ = self.rules.of(group)
        running = self.running[group]
        if limit is not None and running >= limit:
            if limit == 0:
                return f"group {group} is held (its limit is 0)"
            return f"group {group} at its limit {running}/{limit}"
        if rate is not None and self._spent(group, rate) >= rate[0]:
            wait = self.ready_in(group) or 0.0
            return f"group {group} rate {rate_text(rate)}: next start in {wait:.0f} s"
        return None

    def token_returns(self, group: str | None) -> list[float]:
        """When each token `group` spent of its rate comes back (the clock's times); [] with
        no rate (the schedule's `group_rate`)."""
        if group is None:
            return []
        rate = self.rules.of(group)[1]
        if rate is None:
            return []
        self._spent(group, rate)  # (the ones back already dropped)
        with self._lock:
            return [at + returns_after(rate[1]) for at in self._starts.get(group, ())]

    def counts(self) -> tuple[dict[str, int], dict[str, int]]:
        """(running, started) per group this gate has counted."""
        with self._lock:
            return dict(self.running), dict(self.started)

    def facts(self, group: str, *, waiting: int, running: int) -> dict:
        """What `status`, the dashboard and the metrics say of `group`: what waits and runs,
        its rules in force, and why its waiting items are held (None: they are not)."""
        limit, rate, weight = self.rules.of(group)
        return {
            "waiting": waiting,
            "running": running,
            "limit": limit,
            "rate": rate_text(rate) if rate else None,
            "weight": weight,
            "held": self.why_held(group) if waiting else None,
        }
