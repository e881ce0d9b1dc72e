"""The manager: a poller feeding a rate-limited dedup queue, a dispatcher that starts items in
the line's order as capacity frees up, and workers that run them (the generic loop of Burns'
work-queue manager: list -> diff -> dispatch -> track completion).

    poller / watch ──add(name)──► RateLimitingQueue ──► Dispatcher: a slot, then the head
                                        ▲                  of the line, begin (in order)
                                        │                          │ started
                                        └── add_rate_limited ◄── worker: finish (run, record)
                                            (RETRY), else forget; done

The `Capacity` limit (the parallelism) decides how many units of work run at once; there are
as many workers as the most that ever may (the autoscaler's ceiling). Stopping (SIGTERM/SIGINT,
or the end of a `--once` run) shuts the queue, closes capacity so nothing new starts, and gives
running work a grace period before the backend ends it; interrupted items go back to pending.
What a listing puts in line is `intake`'s, cancels of items that left the source are
`cancellation`'s, a record that cannot be written is `fault_hold`'s, what is asked of the
queue and what it tells back is `asked`'s, and a `--once` run is `once_run`'s (what it did,
`run_report`'s).

The manager is handed what it drives - source, ledger, backend (the ports of `manager.ports`),
options, and the leader elector when there is one; `manager.assembly` builds them - and takes
its parts built (`use`), by `runtime.wiring`, each after what it needs (`Manager.built` does
both). It never asks what kind of backend or source it drives.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable

from ..faults import StorageFault
from ..planning.measure import SlidingWindow
from ..ports import (
    Backend,
    ClaimLost,
    Elector,
    Ledger,
    Outcome,
    Source,
    SourceError,
)
from ..tenancy.rules import TenancyOptions
from .dispatcher import Dispatcher, dispatcher_for
from .manager_options import ManagerOptions
from .modes import Alone, mode_for
from .once_run import OnceRun
from .reconciler import Result
from .run_report import TERMINAL, RunReport
from .tenants import Tenants, listed_groups_of
from .wiring import ManagerParts, wire

log = logging.getLogger(__name__)


class Manager(OnceRun):
    def __init__(
        self,
        source: Source,
        ledger: Ledger,
        backend: Backend,
        options: ManagerOptions,
        *,
        elector: Elector | None = None,
        on_result: Callable[[str, Result], None] | None = None,
    ) -> None:
        """The manager's own state; its parts come built, by `use` (see `built`)."""
        self.source = source
        self.ledger = ledger
        self.backend = backend
        self.options = options
        self.elector = elector
        self.on_result = on_result
        self.lost_leadership = False
        self.mode: Alone | None = None  # alone or one of a fleet (`use`)
        self.paused_since: float | None = None  # as last read from the ledger (`Asked`)
        self.window = SlidingWindow(options.window, time.time)
        self.stop_event = threading.Event()
        self.tenants: Tenants | None = None  # (`use`, and `use_tenants` while it runs)
        self._report: RunReport | None = None  # a --once run's, while it runs
        self._blocked_by = None  # a `--once` run's look at whether it is blocked (once_run)
        self._blocked_next = 0.0  # when it looks again (monotonic)
        self._dispatcher: Dispatcher | None = None
        self._stopping = threading.Lock()
        self._stopped = False
        self.started: float | None = None  # when this manager began to work (it leads)

    @classmethod
    def built(
        cls, source: Source, ledger: Ledger, backend: Backend, options: ManagerOptions, *,
        elector: Elector | None = None, on_result: Callable[[str, Result], None] | None = None,
        registry=None, mode: Alone | None = None,
    ) -> Manager:  # fmt: skip
        """A manager with every part (`runtime.wiring`); `mode`: alone or one of a fleet
        (`modes.mode_for`, which the assembly calls; by default chosen here from the
        ledger)."""
        manager = cls(source, ledger, backend, options, elector=elector, on_result=on_result)
        mode = mode if mode is not None else mode_for(ledger, backend)
        manager.use(wire(manager, registry=registry, mode=mode), mode)
        return manager

    def use(self, parts: ManagerParts, mode: Alone) -> None:
        """Take the parts `wiring.wire` built for this manager, before anything runs."""
        self.mode = mode
        self.capacity = parts.capacity
        self.tenants = parts.tenants
        self.queue = parts.queue
        self.asked = parts.asked
        self.autoscaler = parts.autoscaler
        self.cancellations = parts.cancellations
        self.reconciler = parts.reconciler
        self.intake = parts.intake
        self.hold = parts.hold
        self.leaving = parts.leaving
        self.poller = parts.poller
        self.adoption = parts.adoption
        self.others = parts.others
        self._settles = parts.settles
        self._durations = parts.durations

    def dispatch_closed(self) -> bool:
        """Whether no slot may be given now: the queue is paused, or a fault holds dispatch
        (the capacity asks)."""
        return self.paused_since is not None or self.fault is not None

    def use_tenants(self, options: TenancyOptions) -> Tenants:
        """Groups from now on, for a manager started without them (limits asked of the
        queue while it runs): its line becomes one line per group, holding what waits; what
        runs already is not counted against a group's limit."""
        tenants = Tenants(options, listed_groups_of(self.source))
        if self.mode.orders_its_line:
            order = tenants.order(self.ledger.priority)

            def refill(waiting):
                for key in waiting:
                    order.push(key)
                return order

            self.queue.use_order(refill)
            if self.intake.prioritizer is not None:
                self.intake.prioritizer.ordered = True
        tenants.attach(self.queue)
        self.mode.use_tenants(tenants)
        self.tenants = tenants
        return tenants

    def _dispatched(self, name: str) -> None:
        if self.tenants is not None:
            self.tenants.started(name)  # (a manager alone: its grouped line counted it)
        self.intake.left_line(name)
        if self.others is not None and self._report is not None:
            self.others.began.add(name)

    # -- feeding the queue -----------------------------------------------------------------

    def enqueue(self, names: list[str]) -> None:
        """Record new names, then queue every name that still needs work (including any that
        `workqueue retry` asked for since the last time). While the record cannot be written
        nothing is recorded: the next listing brings the names again."""
        try:
            self.intake.listed(names)
        except StorageFault as fault:
            self.hold.hold_for(fault)

    # -- what became of each item the dispatcher took --------------------------------------

    def _settle(self, name: str, result: Result | None, error: BaseException | None) -> None:
        """The dispatcher's report (see `manager.runtime.dispatcher`): an item that needs
        the disk waits for it, one whose data the source would not give is retried."""
        if isinstance(error, ClaimLost):  # a rival runs it now: nothing of it is ours to do
            log.warning("%s: %s; another manager runs it", name, error)
            result = Result.SKIPPED
        elif isinstance(error, StorageFault):  # not the item's failure: it waits for the disk
            self.hold.hold_for(error)
            result = Result.STOPPED
            if not self.stop_event.is_set():
                self.queue.add(name)  # back in line when dispatch resumes (see done())
        elif error is not None:  # one item's trouble never stops the others
            if isinstance(error, SourceError):
                log.warning("%s: cannot fetch item data (%s); will retry", name, error)
            else:
                log.error("%s: unexpected error; will retry", name, exc_info=error)
            result = Result.RETRY
            self._note(name, result, None)
        report = self._report
        if self.others is not None and (report is None or name not in report.results):
            # not ended here (lost, put back, to be retried): whichever manager ends it, a
            # --once run hears of it from the ledger
            self.others.began.discard(name)
        self._requeue_after(name, result)

    def _requeue_after(self, name: str, result: Result) -> None:
        """client-go's worker duty for an item taken with get(): RETRY -> add_rate_limited,
        anything else -> forget; always done."""
        try:
            if result in (Result.GONE, Result.SKIPPED, Result.HELD):
                self.mode.set_aside(self.queue, name)  # needs no work now (`modes`)
            if result == Result.RETRY and not self.stop_event.is_set():
                self.queue.add_rate_limited(name)
            else:
                self.queue.forget(name)
                if result == Result.STOPPED and not self.stop_event.is_set():
                    # interrupted, not by this manager's stop (a worker gone with its shim):
                    # back in line at once, its attempt not counted
                    self.queue.add(name)
        finally:
            self.queue.done(name)
            if self.tenants is not None:
                self.tenants.ended(name)

    def _came_back(self, names: list[str]) -> None:
        """Items of a held removal the source lists again: back in line (a --once run's
        listings only watch for removals, so nothing else would queue them)."""
        now = time.time()
        for name in names:
            if self.reconciler.needs_work(name):
                self.intake.wait(name, now)

    def _claims_lost(self, names: list[str]) -> None:
        """This manager was declared dead while these ran (stopped, or cut off from the
        shared ledger, longer than its lease): their items run elsewhere now - end them
        here. Their outcomes are not recorded (`ClaimLost`): counted lost, never succeeded."""
        self.cancellations.end_runs(names)

    def _retry_adopted(self, name: str) -> None:
        if not self.stop_event.is_set():
            self.queue.add_rate_limited(name)

    def _record_kept(self) -> None:
        """Write the outcomes a `StorageFault` kept from the record (`FaultHold`'s probe)."""
        for name, result, outcome in self.reconciler.record_unrecorded():
            self._note(name, result, outcome)
            if result == Result.RETRY:
                self.queue.add_rate_limited(name)

    def _hold_changed(self) -> None:
        self.capacity.poke()
        if not self.hold.once:
            self.asked.note_manager()

    @property
    def fault(self) -> StorageFault | None:
        """The fault the manager holds dispatch for (`manager.runtime.fault_hold`), or None."""
        return self.hold.fault

    def final_fault(self) -> StorageFault | None:
        """The fault that ended a `--once` run (its exit 3), or None. A fleet's run that a fault
        met but did not end - every target settled, every outcome recorded - ended whole: a
        fault still held at its last moment (met releasing its claims, or just before the other
        managers finished the last targets) leaves nothing to run again, and its claims run
        out with its heartbeat."""
        fault = self.hold.final()
        report = self._report
        if (fault is not None and self.mode.waits_out_faults and report is not None
                and len(report.results) >= len(report.targets)
                and not self.reconciler.unrecorded):  # fmt: skip
            log.info("%s at the run's end: every target was settled and recorded", fault.short)
            return None
        return fault

    @functools.lru_cache(maxsize=8)  # noqa: B019 - three labels, the manager lives long
    def _duration(self, outcome: str):
        """The item-duration histogram's child for `outcome` (looked up once)."""
        return self._durations.labels(outcome)

    def _note(self, name: str, result: Result, outcome: Outcome | None) -> None:
        if outcome is not None and outcome.seconds is not None and not outcome.interrupted:
            if self._durations is not None:
                ended = "succeeded" if outcome.succeeded else "failed"
                if outcome.cancelled:
                    ended = "cancelled"
                self._duration(ended).observe(outcome.seconds)
            if not outcome.cancelled:  # cut short: not a service time
                self.window.served(outcome.seconds)
        if result in TERMINAL:
            self.intake.left_line(name)
            if self._settles is not None:
                self._settles.settled(name)
        if self.on_result is not None and result in TERMINAL | {Result.RETRY}:
            self.on_result(name, result)
        report = self._report
        if report is not None:
            report.note(name, result, outcome)

    # -- running ---------------------------------------------------------------------------

    def lead(self) -> bool:
        """With an elector: wait until this manager leads the queue. If leadership is lost
        later, the manager stops and `lost_leadership` is set (the process should exit so its
        supervisor restarts it as a candidate, as client-go's controllers do). False when the
        manager was stopped before it ever led. Without an elector: True at once."""
        if self.elector is None:
            return True

        def lost() -> None:
            self.lost_leadership = True
            self.stop()

        self.elector.on_lost(lost)
        self.elector.start()
        log.info("leader election: standing by for %s", self.elector.lease_name)
        return self.elector.wait_leading(self.stop_event.is_set)

    def watch_pause(self, interval: float = 0.5) -> None:
        """Follow what is asked of the queue until stopped (`asked.Asked.follow`)."""
        self.asked.follow(interval)

    def apply_parallelism(self, parallelism: int) -> None:
        """Make `parallelism` the number of slots now: the one way a change takes effect
        (what was asked of the queue, or the autoscaler's decision, both through `asked.py`).
        The dispatcher grows first, so there are never fewer workers than slots; a smaller
        number is reached as running work ends (nothing is stopped)."""
        if self._dispatcher is not None:
            self._dispatcher.grow(parallelism)  # never fewer workers than slots
        self.capacity.set_limit(parallelism)
        self.asked.note_manager()

    def start_workers(self) -> None:
        """Start dispatching: the pause follower, the dispatcher and its workers, and the
        autoscaler when there is one."""
        self.started = time.time()
        self._asked_at_start()  # before any worker may take a slot
        threading.Thread(target=self.watch_pause, args=(self.options.follow_interval,),
                         name="pause", daemon=True).start()  # fmt: skip
        self.asked.note_manager()
        workers = max(
            self.capacity.limit, self.options.parallelism, self.options.max_parallelism or 0
        )
        self.adoption.start()
        self.mode.start(self.queue, self.stop_event, self.hold.hold_for)
        self._dispatcher = dispatcher_for(
            self.backend, self.queue, self.capacity, self.reconciler, self._settle, workers
        ).start()
        if self.autoscaler is not None:
            threading.Thread(
                target=self.autoscaler.run, args=(self.stop_event,), name="autoscaler", daemon=True
            ).start()

    def _asked_at_start(self) -> None:
        """`asked.at_start()`: a pause in force and what was asked of the queue, read before any
        worker may take a slot. Where this manager waits out faults (a shared ledger's `--once`
        run, a long-running manager) a fault in those reads is held and they are read again
        every `probe_interval` until they pass or the manager stops - a fleet's manager that
        came up during an outage ended with exit 3 once it had joined; a `--once` run on its
        own record ends on the fault, as on any other."""
        while True:
            try:
                self.asked.at_start()
                return
            except StorageFault as fault:
                if self.hold.once:
                    raise
                self.hold.hold_for(fault)
            if self.stop_event.wait(self.options.probe_interval):
                return  # stopped meanwhile: the run ends as on any stop

    def run_forever(self) -> None:
        """Poll (or watch) and work until `stop()`."""
        self.start_workers()
        follow = self.poller.follow_watch if self.options.watch else self.poller.run
        feeder = threading.Thread(target=follow, name="poller", daemon=True)
        feeder.start()
        # A short timeout, not a bare wait: stop() is called from a signal handler, and a
        # handler that runs inside this very wait must not be the only thing that wakes it.
        # Off the main thread (a queue of `workqueue operator`) no handler runs here: one
        # wait, no wake-ups twice a second per queue.
        main = threading.current_thread() is threading.main_thread()
        while not self.stop_event.wait(0.5 if main else None):
            pass
        self._drain()

    def stop(self) -> None:
        """Stop taking items; running work gets the grace period (see the module docstring)."""
        self.stop_event.set()
        report = self._report
        if report is not None:
            report.wake()

    def _drain(self) -> None:
        with self._stopping:
            if self._stopped:
                return
            self._stopped = True
        self.queue.shut_down()
        self.capacity.close()
        self.backend.shutdown(self.options.grace)
        if self._dispatcher is not None:
            self._dispatcher.join()
        self.adoption.join()
        try:
            self._record_kept()  # (a retry it asks for is ignored: the queue is shut down)
            self.mode.let_go()  # what it holds (`modes`)
        except StorageFault as fault:  # left running: the next start puts them back
            self.hold.hold_for(fault)
        if self.started is not None:
            self.asked.note_manager(running=False)
