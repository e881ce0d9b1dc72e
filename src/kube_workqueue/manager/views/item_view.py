"""One item as `workqueue status` and the dashboard show it: its state, and why it is there.

`item_view(row, context)` turns a backend's row (`manager.ports.Row`) into an `ItemView`
whose `reason` says in words what the item waits for (a slot, a manager, the end of a pause
or of a hold on removals), how long it ran, or when a failed one may run again - the same
words for every backend and every reader. The line's positions and predicted starts are
filled in afterwards by the schedule (`schedule.py`), for the waiting items only.

`Context` is what is known of the manager running the queue, if one is - the parallelism in
force, the retry policy, a pause or a hold - which the words depend on: "waiting for a free
slot" needs a manager, "backing off until" a policy. A running item of a manager that stopped
is said so: local processes end with their manager (`Context.work_outlives_manager` False)
and the next manager records how they ended; a cluster's Jobs run on without one.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..durations import human, moment
from ..planning.measure import Measured
from ..ports import Row, State
from ..tenancy.rules import TenancyOptions

if TYPE_CHECKING:  # retry imports the workqueue and so prometheus-client: not at parse time
    from ..retry import RetryPolicy


@dataclass(frozen=True)
class Context:
    """What is known of the manager running the queue, if one is."""

    now: float
    parallelism: int | None = None  # None: no manager runs the queue now
    policy: RetryPolicy | None = None  # tells an item backing off from one failed for good
    paused_since: float | None = None
    target_utilization: float = 0.9
    window: float = 3600.0  # how far back arrivals and service times are measured
    measured: Measured | None = None  # given figures; else measured from the rows (`measured`)
    not_started: frozenset[str] = frozenset()  # running items whose work has not begun yet
    # False when the rows' first-seen times are not arrivals (Kubernetes: a Job's creation is
    # its dispatch); then no arrival rate is measured from them.
    arrivals_known: bool = True
    held: str | None = None  # why the running manager holds dispatch (`manager.faults`)
    # why the running manager holds the cancels of items that left the source all at once
    removals_held: str | None = None
    withheld: frozenset[str] = frozenset()  # what that hold keeps: not started, not cancelled
    # False when running items are only what a stopped manager left (local processes): they
    # run again when a manager starts; True when they go on without one (a cluster's Jobs).
    work_outlives_manager: bool = True
    tenancy: TenancyOptions | None = None  # the running manager's groups and their rules


@dataclass
class ItemView:
    name: str
    state: str
    attempts: int
    reason: str
    since: float | None
    position: int | None = None  # 1 = the next to start
    eta_seconds: float | None = None
    exit_code: int | None = None
    log: str | None = None
    ready_at: float | None = None  # a failed item backing off: when it may run again
    first_seen: float | None = None
    ran_seconds: float | None = None  # a finished item's last attempt
    priority: int = 0  # higher starts first (shown when not 0)
    group: str | None = None  # its tenant (`--group`), when the queue has groups

    def as_json(self) -> dict:
        out = {
            "name": self.name,
            "state": self.state,
            "attempts": self.attempts,
            "reason": self.reason,
            "since": iso(self.since),
        }
        if self.priority:
            out["priority"] = self.priority
        if self.group is not None:
            out["group"] = self.group
        if self.position is not None:
            out["position"] = self.position
            out["eta_seconds"] = rounded(self.eta_seconds)
        if self.exit_code is not None:
            out["exit_code"] = self.exit_code
        if self.ran_seconds is not None:
            out["ran_seconds"] = rounded(self.ran_seconds)
        if self.log is not None:
            out["log"] = self.log
        return out


def item_view(row: Row, context: Context) -> ItemView:
    """`row` as people read it: its state, and why it is there in words - what it waits for,
    how long it ran, when a failed one may run again - as `context` (the manager running the
    queue, if one is) makes it so."""
    now = context.now
    view = ItemView(row.name, row.state, row.attempts, "", row.first_seen or None)
    view.log = row.log_path
    view.first_seen = row.first_seen or None
    view.priority = row.priority
    if row.state in (State.SUCCEEDED, State.FAILED) and row.started and row.finished:
        view.ran_seconds = max(0.0, row.finished - row.started)
    if row.state in (State.PENDING, State.FAILED) and row.name in context.withheld:
        view.reason = (
            "held: it left the source with many others at once; neither started nor cancelled "
            "until the hold ends (it comes back, its time passes, or `workqueue resume "
            "--accept-removals`)"
        )
    elif row.state == State.PENDING:
        if context.paused_since is not None:
            view.reason = f"waiting: the queue is paused since {moment(context.paused_since)}"
        elif context.held is not None and context.parallelism is not None:
            view.reason = f"waiting: the manager holds dispatch - {context.held}"
        elif context.parallelism is None:
            view.reason = "waiting for a manager to run the queue"
        elif context.parallelism == 0:
            view.reason = "waiting: the parallelism is 0, nothing new starts (workqueue scale)"
        else:
            view.reason = "waiting for a free slot"
    elif row.state == State.RUNNING:
        view.since = row.started or row.first_seen or None
        started = f" since {moment(row.started)}" if row.started else ""
        if context.parallelism is None and not context.work_outlives_manager:
            view.reason = (
                f"its manager stopped while it ran (attempt {row.attempts}"
                f"{', started ' + moment(row.started) if row.started else ''}): the next "
                "manager records how its worker ended, and runs it again only if it never "
                "finished"
            )
        else:
            ran = f" ({human(now - row.started)} so far)" if row.started else ""
            view.reason = f"running{started}{ran}, attempt {row.attempts}"
    elif row.state == State.SUCCEEDED:
        view.since = row.finished
        took = view.ran_seconds
        view.reason = f"succeeded in {human(took)}" if took is not None else "succeeded"
        view.exit_code = row.exit_code
    elif row.state == State.CANCELLED:
        view.since = row.finished
        when = f" at {moment(row.finished)}" if row.finished else ""
        if row.attempts:
            view.reason = f"cancelled{when}: it left the source (attempt {row.attempts} ended)"
        else:
            view.reason = f"cancelled{when}: it left the source before it started"
    else:  # failed: for good, or backing off before another attempt
        view.since = row.finished
        view.exit_code = row.exit_code
        why = _failure(row)
        policy = context.policy
        if (
            policy is not None
            and context.parallelism is not None
            and policy.needs_work(row.state, row.attempts)
        ):
            ready = (row.finished or now) + policy.item_backoff.delay(max(row.attempts - 1, 0))
            view.ready_at = ready
            when = f"until {moment(ready)}" if ready > now else "done, retrying"
            view.reason = (
                f"backing off {when} ({why}; attempt {row.attempts} of {policy.max_attempts})"
            )
        else:
            view.reason = f"{why} after {row.attempts} attempt{'s' * (row.attempts != 1)}"
    return view


def _failure(row: Row) -> str:
    if row.exit_code is not None:
        return f"failed with exit code {row.exit_code}"
    return f"failed: {row.last_error}" if row.last_error else "failed"


def iso(when: float | None) -> str | None:
    """A time as UTC RFC 3339, to the second (None stays None)."""
    if when is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when))


def rounded(value: float | None, digits: int = 3) -> float | None:
    """A figure for JSON: rounded, and None where it is not a number (infinite, NaN)."""
    if value is None or math.isinf(value) or math.isnan(value):
        return None
    return round(value, digits)
