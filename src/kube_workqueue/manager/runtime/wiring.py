"""The manager's parts, built once, each after what it needs: the one place a `Manager` is put
together (`manager.assembly` calls it through `Manager.built`; tests too).

    manager = Manager(source, ledger, backend, options)     its own state, no part yet
    manager.use(wire(manager, registry=..., mode=...))       every part, built in order

The parts and the manager call each other - an outcome is noted by the manager, a fault held by
the fault hold, a removal proved by the leaving - and a part built later than one that calls it
was reached, before, through a lambda to an attribute not yet set. Here each part is built
after every part it is handed, so what a part gets exists:

    needs_work, unrecorded      the ledger and the policy's diff; the outcomes a fault kept
    fault hold                  (counts `unrecorded`: no reconciler needed)
    capacity                    (closed by the manager's `dispatch_closed`: a pause, a fault)
    the line                    (a claim's fault goes to the fault hold)
    asked, cancellations
    leaving                     (asks `needs_work`, not the reconciler)
    reconciler                  (asks the leaving what a removal withholds)
    intake, autoscaler          (the backlog is the intake's and the capacity's)
    poller, adoption, others

What remains a call back is the manager's own - its bound methods (`_note`, `_dispatched`,
`_record_kept`, `enqueue`, `stop`, ...), which touch its parts only when called, and nothing is
called before `Manager.use` has them all. One edge is closed after both ends exist, in the open:
the leaving's `relist` is the poller's (a proved removal asks the poller for a complete listing, and
the poller reports removals to the leaving).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from ..ports import SettlesItems
from ..priority_rules import Rules
from .adoption import Adoption
from .asked import Asked
from .autoscaler import Autoscaler
from .cancellation import Cancellations
from .capacity import Capacity
from .fault_hold import FaultHold
from .intake import Intake
from .leaving import Leaving
from .modes import Alone
from .poller import Poller
from .priorities import Prioritizer
from .reconciler import NeedsWork, Reconciler
from .tenants import Tenants, tenants_for


@dataclass(frozen=True)
class ManagerParts:
    """Every collaborator of one manager, built (`wire`); `Manager.use` takes them."""

    capacity: Capacity
    tenants: Tenants | None
    queue: Any  # the line (`modes.Line`): the manager's own queue, or a shared ledger's claims
    asked: Asked
    autoscaler: Autoscaler | None
    cancellations: Cancellations
    reconciler: Reconciler
    intake: Intake
    hold: FaultHold
    leaving: Leaving
    poller: Poller
    adoption: Adoption
    others: Any  # `others.OthersFollower` of a --once run on a shared ledger, or None
    settles: SettlesItems | None  # the source, when it is told an item settled
    durations: Any  # the item-duration histogram, when metrics are kept


def wire(manager, *, registry=None, mode: Alone) -> ManagerParts:
    """The parts of `manager` (a `runner.Manager`: its source, ledger, backend, options and
    own state set; not imported here, which it imports), in the order of the module
    docstring. Caller's duty: `manager.use(...)` the result before anything runs."""
    source, ledger, backend, options = (
        manager.source,
        manager.ledger,
        manager.backend,
        manager.options,
    )
    policy = options.retry_policy
    needs_work = NeedsWork(ledger, policy)
    unrecorded: dict = {}
    hold = FaultHold(
        probe=ledger.probe,
        record_kept=manager._record_kept,
        kept=unrecorded.__len__,
        changed=manager._hold_changed,
        stop=manager.stop,
        stopped=manager.stop_event,
        probe_interval=options.probe_interval,
        grace=options.grace,
    )
    # work running outside this manager (a rival's Jobs) counts against the limit too
    capacity = Capacity(options.parallelism, mode.others_running(), manager.dispatch_closed)
    backend.on_change(capacity.poke)
    # the queue's tenants (`tenants`: --group, --limit, --rate, --fair), or None
    tenants = tenants_for(options.tenancy, source)
    order = None
    if tenants is not None and mode.orders_its_line:
        order = tenants.order(ledger.priority)
    # the manager's own queue, or a shared ledger's claims (`modes`)
    queue = mode.line(policy.rate_limiter(), registry, capacity.free, hold.hold_for, order=order)
    if tenants is not None:
        tenants.attach(queue)
        mode.use_tenants(tenants)
    mode.when_claims_lost(manager._claims_lost)
    asked = Asked(manager)
    cancellations = Cancellations(ledger, backend)
    leaving = Leaving(
        options, cancellations, needs_work, ledger, note=manager._note, fault=hold.hold_for,
        changed=asked.note_manager, back=manager._came_back,
    )  # fmt: skip
    reconciler = Reconciler(
        ledger, source, backend, capacity, policy=policy, cancellations=cancellations,
        on_outcome=manager._note, on_dispatch=manager._dispatched, withheld=leaving.withholds,
        missing=leaving.missing, needs_work=needs_work, unrecorded=unrecorded,
    )  # fmt: skip
    prioritizer = Prioritizer(
        Rules(options.priorities), source, ledger, queue if mode.orders_its_line else None,
        ordered=order is not None,  # a grouped line orders by priority already
    )  # fmt: skip
    intake = Intake(
        ledger, source, queue, manager.window, needs_work,
        rerun_changed=options.on_change == "rerun", prioritizer=prioritizer,
        waiting_is_listed=mode.waiting_is_listed,
    )  # fmt: skip
    autoscaler = None
    if options.autoscale:
        autoscaler = Autoscaler(
            asked.autoscaled, options.parallelism, manager.window.measured, time.monotonic,
            backlog=lambda: len(intake.waiting_since) + capacity.in_use,
            minimum=options.min_parallelism,
            maximum=options.max_parallelism or options.parallelism,
            interval=options.scale_interval, down_delay=options.scale_down_delay,
            target_utilization=options.target_utilization,
        )  # fmt: skip
    # Keep listed data only of items that will run - unless every item's listed version is
    # compared with the one it ran at (--on-change rerun), which needs them all (and items
    # whose group is their data's - no --group pattern - or whose needs are
    # (--needs-from-data) are listed with it)
    groups_in_data = tenants is not None and not options.tenancy.group
    needs_in_data = mode.reads_needs_from(source)
    if options.on_change != "rerun" and not groups_in_data and not needs_in_data:
        source.keep_data_of(needs_work)
    poller = Poller(
        source, manager.enqueue, interval=options.poll_interval, stop=manager.stop_event,
        on_removed=leaving.removed if options.cancel_removed else None, guard=leaving.guard,
        baseline=leaving.baseline,
    )  # fmt: skip
    if options.cancel_removed:
        leaving.relist = poller.relist_now  # (the one edge closed after both ends exist)
    poller.on_log_change = asked.note_manager  # (status says when a log started over)
    # what a manager that died left running, waited for (`adoption`)
    adoption = Adoption(
        backend, reconciler, capacity, cancellations, retry=manager._retry_adopted,
        fault=hold.hold_for, tenants=tenants,
    )  # fmt: skip
    durations = None
    if registry is not None:
        durations = _metrics(registry, manager, capacity, intake, leaving, hold, ledger)
    return ManagerParts(
        capacity=capacity, tenants=tenants, queue=queue, asked=asked, autoscaler=autoscaler,
        cancellations=cancellations, reconciler=reconciler, intake=intake, hold=hold,
        leaving=leaving, poller=poller, adoption=adoption,
        # a --once run on a shared ledger: the targets other managers end, noted
        others=mode.follower(needs_work),
        settles=source if isinstance(source, SettlesItems) else None, durations=durations,
    )  # fmt: skip


def _metrics(registry, manager, capacity, intake, leaving, hold, ledger):
    """The manager's collectors on `registry`; the item-duration histogram."""
    from ..views.group_metrics import GroupCollector
    from ..views.observe import ManagerCollector, item_durations

    registry.register(
        ManagerCollector(
            manager.window.measured, lambda: capacity.limit, intake.oldest,
            counts=ledger.counts, paused=lambda: manager.paused_since is not None,
            fault=lambda: hold.fault.kind if hold.fault is not None else None,
            removals_held=leaving.count,
        )
    )  # fmt: skip
    # (groups asked while the manager runs replace its tenants: read them at each scrape)
    registry.register(GroupCollector(lambda: manager.tenants.groups() if manager.tenants else {}))
    return item_durations(registry)
