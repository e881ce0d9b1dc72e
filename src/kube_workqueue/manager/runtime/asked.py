"""What is asked of a queue, followed by the manager running it, and what it reports back.

Three things may be asked of a running queue, by whoever can reach where the queue is kept:
pause (`workqueue pause` / `resume`; the WorkQueue's `spec.paused`), a parallelism (`workqueue
scale`; the WorkQueue's `spec.parallelism`, set by a person, an HPA or KEDA through `/scale`),
and - the other way round - its status (the WorkQueue's `status`). The ledger reads the first
two from somewhere cheap (a file beside the local ledger, a watched cache on Kubernetes:
`Ledger.paused_since`, `Ledger.wanted_parallelism`) and writes the third (`Ledger.report`);
`Asked.follow` reads twice a second and hands over the status every STATUS_SECONDS, and at once
after a change of what was asked (a pause, a resume, a new parallelism: what `kubectl wait`,
an HPA or KEDA then looks for in the status). Building the status over a million known items
takes seconds, so it never runs more often than every ten times as long as it last took: a big
queue's status never keeps a core busy.

One decider at a time: with `--autoscale` the built-in autoscaler decides, and its decisions
go through `Ledger.want_parallelism` like anybody's (so the WorkQueue always tells the truth);
a parallelism someone else asked for is followed too, and the autoscaler decides on from it.
At start, what was asked wins over `--parallelism`.

The other way round too, for `workqueue status`: the manager's facts (its pid and host, the
parallelism and retry policy in force, what holds it) are left with the ledger at start, at
every change of them, and cleared when it stops (`note_manager`).

State: the manager's `paused_since` (the pause as last read) and its capacity's limit (the
parallelism in force) - written here, read by the capacity, the views and `status_report`.
"""

from __future__ import annotations

import logging
import os
import socket
import time

from ..durations import moment
from ..faults import StorageFault
from ..parallelism import parallelism_problem
from ..ports import KeepsLiveRows, SaysWhenAsked
from ..tenancy.rules import TenancyOptions, asked_rules

log = logging.getLogger(__name__)

STATUS_SECONDS = 5.0  # how often the queue's status is handed to the ledger


class Asked:
    def __init__(self, manager) -> None:
        """`manager`: the `runner.Manager` whose ledger, capacity and autoscaler these are."""
        self.manager = manager
        self.answer_due = False  # something asked took effect: its status is due at once
        self.accepted_seen: float | None = None  # the last `resume --accept-removals` seen
        self.refused: object = None  # the last parallelism refused (said once)
        self.refusal: str | None = None  # why, for `status`
        self.rules_seen: object = None  # the group rules asked, as last read
        self.counted = False  # whether the counts are known (a listing recorded): then said

    def at_start(self) -> None:
        """Before any worker may take a slot: a pause in force, and what was asked."""
        m = self.manager
        since = m.ledger.paused_since()
        if since is not None:
            self.pause_changed(since)
        self.accepted_seen = m.ledger.removals_accepted()  # only a later one accepts anything
        self.follow_group_rules()
        wanted = self.bounded(m.ledger.wanted_parallelism())
        if wanted is not None and wanted != m.capacity.limit:
            log.warning(
                "parallelism %d, as asked of the queue before (workqueue scale, or the "
                "WorkQueue's spec) - not --parallelism %d; `workqueue scale --parallelism N` "
                "changes it",
                wanted,
                m.capacity.limit,
            )
            if m.autoscaler is not None:
                m.autoscaler.current = wanted
            m.capacity.set_limit(wanted)

    def bounded(self, wanted: object) -> int | None:
        """A parallelism asked of the queue, or None when none is - or it is out of bounds
        (a hand-edited file, an old version's): refused in the log once, the current kept."""
        if wanted is None:
            return None
        problem = parallelism_problem(wanted)
        if problem is None:
            self.refused = self.refusal = None
            return wanted
        if wanted != self.refused:
            log.error("parallelism asked of the queue refused (%s): keeping %d",
                      problem, self.manager.capacity.limit)  # fmt: skip
            self.refused = wanted
            self.refusal = f"{problem}: keeping {self.manager.capacity.limit}"
            self.note_manager()
        return None

    def follow(self, interval: float = 0.5) -> None:
        """Until the manager stops: each change said once and in force at once, and the
        status handed to the ledger every STATUS_SECONDS (`ManagerOptions.status_interval` when
        set; an answer to a change of spec at once)."""
        m = self.manager
        reported = float("-inf")
        took = 0.0  # how long the last status took to build
        # a ledger that can say when what is asked may have changed (a WorkQueue's watch):
        # looked at on each change, not `interval` - a queue of many at rest wakes only to
        # report its status (`ManagerOptions.follow_on_change`)
        every = m.options.status_interval or STATUS_SECONDS
        followed = m.options.follow_on_change and isinstance(m.ledger, SaysWhenAsked)
        changed = m.ledger.asked_changed if followed else None
        while not m.stop_event.is_set():
            if changed is not None:
                changed.clear()  # before reading: a change from now on wakes the next wait
            # cannot tell: keep the last known state
            since = self._read("whether the queue is paused", lambda: m.ledger.paused_since(),
                               m.paused_since)  # fmt: skip
            if since != m.paused_since:
                self.pause_changed(since)
            self.follow_parallelism()
            self.follow_accepts()
            self.follow_group_rules()
            if not self.counted and m.intake.taken_once:
                self.counted = True
                self.answer_due = True  # the first counts: said as soon as they are known
            # the status is a view over every item: with a million known it takes seconds,
            # so it may use at most a tenth of the time between two
            gap = time.monotonic() - reported
            if gap >= 10 * took and (self.answer_due or gap >= every):
                self.answer_due = False
                reported = time.monotonic()
                self.report()
                took = time.monotonic() - reported
            if changed is not None:
                changed.wait(max(interval, every - (time.monotonic() - reported)))
            else:
                m.stop_event.wait(interval)

    def follow_group_rules(self) -> None:
        """Group limits and rates asked of the queue (`workqueue scale --limit/--rate`, the
        WorkQueue's `spec.limits`/`spec.rates`) since the last look: in force at once, in
        place of the flags' (a manager without groups gets them now)."""
        m = self.manager
        unread = object()
        asked = self._read("the group rules asked of the queue",
                           lambda: m.ledger.wanted_group_rules(), unread)  # fmt: skip
        if asked is unread or asked == self.rules_seen:
            return
        self.rules_seen = asked
        limits, rates = asked_rules(asked)
        if limits is None and rates is None:
            return
        tenants = m.tenants if m.tenants is not None else m.use_tenants(TenancyOptions())
        tenants.change(limits=limits, rates=rates)
        self.answer_due = True
        self.note_manager()

    def follow_accepts(self) -> None:
        """`workqueue resume --accept-removals` since the last look: the held removals go."""
        unread = object()
        accepted = self._read("whether held removals were accepted",
                              lambda: self.manager.ledger.removals_accepted(), unread)  # fmt: skip
        if accepted is unread:
            return
        if accepted is not None and (self.accepted_seen is None or accepted > self.accepted_seen):
            self.accepted_seen = accepted
            self.manager.leaving.accept()
            self.answer_due = True

    def pause_changed(self, since: float | None) -> None:
        m = self.manager
        if since is not None:
            log.info(
                "queue paused since %s: running work finishes, nothing new starts "
                "(workqueue resume to carry on)",
                moment(since),
            )
        else:
            log.info("queue resumed: dispatching again")
        m.paused_since = since
        m.capacity.poke()
        self.answer_due = True
        self.note_manager()  # `status` tells that this manager holds (or no longer holds)

    def follow_parallelism(self) -> None:
        m = self.manager
        unread = object()
        asked = self._read("the parallelism asked for", lambda: m.ledger.wanted_parallelism(),
                           unread)  # fmt: skip
        if asked is unread:
            return
        try:
            wanted = self.bounded(asked)
        except Exception as exc:
            log.warning("cannot use the parallelism asked for: %s", exc)
            return
        if wanted is None or wanted == m.capacity.limit:
            return
        log.info("parallelism %d -> %d, as asked", m.capacity.limit, wanted)
        if m.autoscaler is not None:  # it goes on deciding from what was asked
            m.autoscaler.current = wanted
        m.apply_parallelism(wanted)
        self.answer_due = True

    def autoscaled(self, parallelism: int) -> None:
        """The built-in autoscaler's decision: asked where every manager sees it, and in
        force here at once."""
        m = self.manager
        try:
            m.ledger.want_parallelism(parallelism)
        except Exception as exc:
            log.warning("cannot record the autoscaler's parallelism %d: %s", parallelism, exc)
        m.apply_parallelism(parallelism)
        self.answer_due = True

    def report(self) -> None:
        """The status handed to the ledger - built only for a ledger that keeps it."""
        if not self.manager.ledger.keeps_status:
            return
        try:
            self.manager.ledger.report(self.status_report())
        except Exception as exc:  # a courtesy to whoever shows the queue: never stops work
            log.warning("cannot report the queue's status: %s", exc)

    def status_report(self) -> dict:
        """The queue now, as the WorkQueue's status shows it (`Ledger.report`)."""
        m = self.manager
        if isinstance(m.ledger, KeepsLiveRows):  # a ledger of a million: see there
            view = self.view(rows=m.ledger.live_rows())
            counts = m.ledger.counts()
        else:
            view = self.view()
            counts = dict(view.counts)
        forecast = view.forecast
        # counts only once a listing is recorded: a manager just started (an operator
        # restarted) knows no item yet - its counts would all be 0, over the true ones its
        # predecessor left, for as long as its first listing takes (a source that is down: as
        # long as it is); its conditions are said meanwhile
        known = {"counts": counts} if m.intake.taken_once else {}
        return {
            **known,
            "parallelism": m.capacity.limit,
            "oldest_waiting_seconds": m.intake.oldest(),
            "service_seconds": forecast.service_seconds,
            "interarrival_seconds": forecast.interarrival_seconds,
            "verdict": forecast.verdict,
            "utilization": forecast.utilization,
            "drain_seconds": forecast.drain_seconds,
            "recommended_parallelism": forecast.recommended_parallelism,
            "paused_since": m.paused_since,
            "held": m.hold.reason(),
            "source_down": str(m.poller.last_error) if m.poller.source_down else None,
            "scaled_by": "builtin" if m.autoscaler is not None else "external",
        }

    def facts(self) -> dict:
        """What `workqueue status` needs to know of this manager (see `Ledger.note_manager`)."""
        m = self.manager
        options = m.options
        return {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started": m.started,
            "parallelism": m.capacity.limit,
            "max_attempts": options.max_attempts,
            "retry_backoff": options.retry_backoff,
            "retry_backoff_cap": options.retry_backoff_cap,
            "target_utilization": options.target_utilization,
            "window": options.window,
            "held": m.hold.reason(),
            "autoscale": m.autoscaler is not None,  # `workqueue scale` refuses then
            "adopted": len(m.adoption.units),  # running work a manager that died left
            "paused_since": m.paused_since,  # the pause as this manager applies it
            "parallelism_refused": self.refusal,  # an out-of-bounds parallelism asked
            "removals_held": m.leaving.reason(),
            # which waiting items the hold keeps (the first thousand): `status` says so of each
            **({"removals_held_names": m.leaving.held_names()} if m.leaving.count() else {}),
            # its --priority rules: `status` in another process orders the line with them
            **({"priorities": [list(r) for r in options.priorities]} if options.priorities else {}),
            # its groups and their rules in force: `status` says which group holds an item
            **({"tenancy": m.tenants.options.facts()} if m.tenants is not None else {}),
            # a log source's identity, and when it last started over (`status` says it)
            **({"source_log": m.poller.log_facts} if m.poller.log_facts else {}),
        }

    def view(self, now: float | None = None, rows: list | None = None):
        """The queue as this manager sees it now (`manager.views.queue_view`), for the
        dashboard and the status; of `rows` only, when given (the ledger's rows otherwise)."""
        from ..views.queue_view import Context, build

        m = self.manager
        context = Context(
            now=time.time() if now is None else now,
            parallelism=m.capacity.limit,
            paused_since=m.paused_since,
            policy=m.options.retry_policy,
            target_utilization=m.options.target_utilization,
            window=m.options.window,
            arrivals_known=m.ledger.arrivals_known,
            held=m.hold.reason(),
            removals_held=m.leaving.reason(),
            withheld=frozenset(m.leaving.held_names()),
            tenancy=m.tenants.options if m.tenants is not None else None,
        )
        return build(m.ledger.where, m.ledger.rows() if rows is None else rows, context)

    def stats(self) -> dict:
        """The raw samples of the sliding window and the parallelism in force (`/stats`)."""
        m = self.manager
        return {**m.window.snapshot(), "parallelism": m.capacity.limit}

    def note_manager(self, running: bool = True) -> None:
        """Leave this manager's facts with the ledger (None: it stopped)."""
        try:
            self.manager.ledger.note_manager(self.facts() if running else None)
        except Exception as exc:  # a courtesy to `status`: never stops the work
            self._unable("leave the manager's facts for `workqueue status`", exc)

    def _read(self, what: str, read, otherwise):
        """What `read()` says of the queue; `otherwise` when it cannot say (`_unable`)."""
        try:
            return read()
        except Exception as exc:
            self._unable(f"read {what}", exc)
        return otherwise

    def _unable(self, what: str, exc: Exception) -> None:
        """A shared ledger's fault holds dispatch - the fleet's record, not this manager's
        courtesy - and is said once, by the hold (which writes the facts again when it
        ends), not every half second; anything else is said here."""
        m = self.manager
        if isinstance(exc, StorageFault) and m.mode.waits_out_faults:
            m.hold.hold_for(exc)  # (nothing more while it holds already)
            return
        log.warning("cannot %s: %s", what, exc)
