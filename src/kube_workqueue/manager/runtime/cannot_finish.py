"""A `--once` run that cannot finish says why and ends, rather than wait for ever.

A run waits for each of its targets to settle. Some cannot, for as long as nobody changes
something: the queue is paused (`workqueue pause`) or scaled to 0 (`workqueue scale
--parallelism 0`), an item's group is held by a limit of 0 (`--limit api=0`), or - on a shared
ledger - an item needs what no live manager offers (`--needs 'gpu-*=gpu'` and nobody offers
`gpu`: the ledger has it out of the line, `manager.fleet.placed`), or the run's own manager
was drained (`workqueue drain`) with no other live one taking new items. Such a run once waited
until killed, saying at best `items out of the line for a manager no live one is: 3 marked`.

`Blocked.look` is asked by the run's wait twice a second. It judges the targets left:

    nothing of this manager runs, and every item left has a cause   ──►  blocked: each cause
                                                                           said once (a warning)
    blocked for `--wait-for` (default 30s) on end                   ──►  the run ends: one
                                                                           line per cause, exit 4
    some item needs what a live manager other than this one offers  ──►  the run waits, and
                                                                           says so once
    anything else (an item in line, backing off, run by another)    ──►  nothing to say

so a manager that will come (a GPU machine starting) has `--wait-for` to arrive, and one that
is there keeps the run waiting for as long as it runs. What each item waits for is the same
judgement `status` makes of it (`views.item_view`), said per cause rather than per item.

State (the run's thread only): `since`, when the run was first found blocked (None while it is
not); `said`, the lines said last, without their counts (said again only when a cause comes or
goes).
"""

from __future__ import annotations

import logging
import re
import time
from collections import Counter
from collections.abc import Callable, Mapping

from ..durations import human
from ..ports import DRAINED

log = logging.getLogger(__name__)


def causes(
    left: list[str],
    *,
    paused: bool,
    parallelism: int,
    held_group: Callable[[str], str | None],
    needs: Mapping[str, tuple[str, str]],
) -> tuple[list[str], list[str]] | None:
    """(why items cannot run - a line per cause, why the rest wait for another manager - a
    line per need) when no item of `left` may run here; None when one may (or `left` is empty).

    `held_group(name)`: the group holding `name` at a limit of 0, or None; `needs[name]`:
    (its need, who offers it: "none" - no live manager, "others" - another live manager,
    "me" - this one; ("", "running") for one another manager holds) for the items of `left`
    that wait with a need or run elsewhere."""
    if not left:
        return None
    if paused:
        return [f"the queue is paused: {_items(len(left), 'waits', 'wait')} (`workqueue "
                "resume` releases them)"], []  # fmt: skip
    if parallelism == 0:
        return [f"the queue's parallelism is 0: {_items(len(left), 'waits', 'wait')} "
                "(`workqueue scale --parallelism N` releases them)"], []  # fmt: skip
    held: Counter[str] = Counter()
    unmet: Counter[str] = Counter()
    elsewhere: Counter[str] = Counter()
    running = 0
    for name in left:
        group = held_group(name)
        if group is not None:
            held[group] += 1
            continue
        need, who = needs.get(name, ("", "me"))
        if who == "none":
            unmet[need] += 1
        elif who == "others":
            elsewhere[need] += 1
        elif who == "running":
            running += 1
        else:
            return None  # this one may run here: the run is not blocked
    ends = [_need_line(need, n, "none") for need, n in sorted(unmet.items())]
    if held:
        groups = ", ".join(sorted(held))
        ends.append(f"{_items(sum(held.values()), 'is', 'are')} in group(s) held by a limit of "
                    f"0 ({groups}): `workqueue scale --limit GROUP=N` releases them")  # fmt: skip
    waits = [_need_line(need, n, "others") for need, n in sorted(elsewhere.items())]
    if running:
        waits.append(f"{_items(running, 'runs', 'run')} on another manager")
    return ends, waits


def _need_line(need: str, count: int, who: str) -> str:
    """What waits for a need that no live manager offers (`who` "none") or another does."""
    if need == DRAINED:
        if who == "none":
            return (f"{_items(count, 'waits', 'wait')} for a manager that takes new items: this "
                    "one is drained (`workqueue drain --undo ID`), and no other live one takes "
                    "any")  # fmt: skip
        return f"{_items(count, 'waits', 'wait')} for the other managers: this one is drained"
    if who == "none":
        return f"{_items(count, 'needs', 'need')} {need}, which no live manager offers"
    return (
        f"{_items(count, 'needs', 'need')} {need}, which another live manager offers: it runs them"
    )


def _items(count: int, one: str, many: str) -> str:
    """`3 items need`, `1 item needs`: the count, and the verb that goes with it."""
    return f"{count} item {one}" if count == 1 else f"{count} items {many}"


def _uncounted(found: tuple[list[str], list[str]]) -> tuple:
    """`found` without its counts: what changes when a cause comes or goes."""
    return tuple(tuple(re.sub(r"\b\d+ items? ", "", line) for line in lines) for lines in found)


class Blocked:
    """The run's look at whether it is blocked (see the module docstring)."""

    def __init__(self, wait_for: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.wait_for = wait_for
        self.clock = clock
        self.since: float | None = None
        self.said: tuple[list[str], list[str]] | None = None

    def look(self, found: tuple[list[str], list[str]] | None) -> list[str] | None:
        """`found`: what `causes` says now. The lines the run ends with, once it has been
        blocked for `wait_for` with nobody else to run anything; None to go on waiting."""
        if found is None:
            self.since = self.said = None
            return None
        ends, waits = found
        said = _uncounted(found)
        if said != self.said:  # (a count that changes alone is not said again)
            self.said = said
            for line in waits:
                log.warning("waiting: %s", line)
            if ends and not waits:
                for line in ends:
                    log.warning("waiting: %s; the run ends in %s unless that changes "
                                "(--wait-for)", line, human(self.wait_for))  # fmt: skip
            elif ends:
                for line in ends:
                    log.warning("waiting: %s", line)
        if waits or not ends:  # another manager runs some: not blocked, it waits for it
            self.since = None
            return None
        now = self.clock()
        if self.since is None:
            self.since = now
        return ends if now - self.since >= self.wait_for else None
