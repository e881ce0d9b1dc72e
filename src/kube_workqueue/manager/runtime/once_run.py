"""A `--once` run (`workqueue run`, `workqueue manager --once`): every item the source lists now,
each until it has finished - its targets fixed at the first listing (with what a held removal
keeps and the work it adopted), recorded before anything runs, followed until each is settled,
and `workqueue retry` heard while it runs.

A run that cannot finish - every item left is one nothing may run here: the queue paused, a
group held at 0, a need no live manager offers - says why and ends after `--wait-for`, exit 4
(`cannot_finish`).

`OnceRun` is a part of `runner.Manager`, not a class of its own: the state it reads and writes
(`_report`, the run's `RunReport` while it runs; `_blocked_by`, its `cannot_finish.Blocked`;
`_blocked_next`, when it looks again) is made in `Manager.__init__`, and it drives the same
parts the long-running manager does (the poller, the intake, the hold, the workers).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from ..faults import StorageFault
from ..ports import ClaimsWork
from .cannot_finish import Blocked, causes
from .reconciler import Result
from .run_report import RunReport

log = logging.getLogger(__name__)


class OnceRun:
    """The `--once` half of the manager (see the module docstring)."""

    def run_once(self, on_start: Callable[[RunReport], None] | None = None) -> RunReport:
        """Process every item the source lists now; return when each has finished (or stop())."""
        # A fault ends a run, except a shared ledger's outage: its claims would run out and
        # the items whose ends it holds would run again elsewhere - it waits for the database.
        self.hold.once = not self.mode.waits_out_faults
        self.hold.shared = self.mode.waits_out_faults
        names = self.poller.first_listing(self.options.source_timeout)
        if names is None:  # stopped before the source ever answered: nothing ran
            now = time.time()
            return RunReport(targets=[], started=now, finished=now, interrupted=True, listed=False)
        # what a held removal keeps is the run's too: it ends when the hold does (cancelled,
        # or run if it comes back) - a run that ignored it would leave it pending for good
        held = self.leaving.held_names(most=None)
        # and so is the work it adopted, listed or not: a run that ended before an adopted
        # worker would stop it and put its item back (or, gone from the source, leave it
        # pending with nothing to end it)
        targets = set(names) | set(held) | self.adoption.names
        report = RunReport(targets=sorted(targets), started=time.time())
        with report.changed:  # nothing is noted before the skipped targets are
            self._report = report
            if not self._recorded_first(lambda: self._take_targets(report)):
                report.interrupted, report.finished = True, time.time()
                return report
        if on_start is not None:
            on_start(report)
        self.start_workers()
        if self.others is not None:  # what the other managers finish counts for this run too
            threading.Thread(
                target=self.others.follow, args=(report, self.stop_event), name="others",
                daemon=True,
            ).start()  # fmt: skip
        if self.options.cancel_removed:  # the targets are fixed; what leaves still counts
            threading.Thread(
                target=self.poller.watch_removals, name="removals", daemon=True
            ).start()
        threading.Thread(target=self._follow_retries, args=(report,), name="retries",
                         daemon=True).start()  # fmt: skip
        # Every target not settled above goes on the queue as it is: the reconciler decides
        # again, and its every answer is reported. (Filtering again here could drop an item a
        # rival manager began meanwhile: neither queued nor reported, the run would never end.)
        now = time.time()
        for name in report.targets:
            if name not in report.results and name not in self.adoption.names:
                self.intake.wait(name, now)
        self._blocked_by = Blocked(self.options.wait_for)
        report.wait_for_all(lambda: self.stop_event.is_set() or self._blocked(report))
        report.interrupted = self.stop_event.is_set()
        report.finished = time.time()
        self.stop_event.set()
        self._drain()
        return report

    def _follow_retries(self, report: RunReport) -> None:
        """`workqueue retry` while a `--once` run runs: what it asks runs again in this run
        (a long-running manager takes the requests with each listing; a run lists once)."""
        while not self.stop_event.wait(self.options.follow_interval):
            try:
                names = self.ledger.take_retry_requests()
            except StorageFault as fault:
                self.hold.hold_for(fault)
                continue
            if not names:
                continue
            now = time.time()
            for name in report.again(names):
                self.intake.wait(name, now)
            log.info("retry asked while the run runs: %s", ", ".join(names))

    def _blocked(self, report: RunReport) -> bool:
        """Whether the run ends now because nothing may run what it has left
        (`cannot_finish`): looked at by the run's wait at most once a second; the lines it
        ends with go to `RunReport.cannot_run`. Never an end while anything of this manager
        runs or a look cannot be made (a ledger that does not answer: the hold says so)."""
        now = time.monotonic()
        if now < self._blocked_next:
            return False
        self._blocked_next = now + 1.0
        try:
            found = self._why_blocked(report)
        except StorageFault as fault:
            self.hold.hold_for(fault)
            found = None
        ends = self._blocked_by.look(found)
        if ends is None:
            return False
        report.cannot_run = ends
        return True

    def _why_blocked(self, report: RunReport):
        """What `cannot_finish.causes` says of the targets left now (None: something runs)."""
        if self.capacity.in_use or self.adoption.names:
            return None
        left = [name for name in report.targets if name not in report.results]
        if not left:
            return None
        tenants = self.tenants

        def held_group(name: str) -> str | None:
            group = None if tenants is None else tenants.group_of(name)
            return group if group is not None and tenants.gate.rules.of(group)[0] == 0 else None

        ledger = self.ledger
        needs = ledger.needs_left(left) if isinstance(ledger, ClaimsWork) else {}
        return causes(left, paused=self.paused_since is not None,
                      parallelism=self.capacity.limit, held_group=held_group,
                      needs=needs)  # fmt: skip

    def _take_targets(self, report: RunReport) -> None:
        """A `--once` run's targets recorded, those that need no work noted SKIPPED."""
        self.ledger.see(report.targets)
        self.intake.taken_once = True  # (a status is due from now on: `Asked.follow`)
        self.intake.revisit(report.targets)
        for name in report.targets:  # adopted work reports when its worker ends
            if name in self.adoption.names or self.reconciler.needs_work(name):
                continue
            if self.mode.someone_else_runs(name):  # heard from the ledger when it ends
                continue
            report.results[name] = Result.SKIPPED
        self.intake.prioritize([n for n in report.targets if n not in report.results])

    def _recorded_first(self, write: Callable[[], None]) -> bool:
        """`write()` done; on a shared ledger an outage meanwhile is waited out (held, said
        once, tried again every probe interval) rather than ending the run - its claims and
        outcomes are the fleet's. False when stopped first."""
        while True:
            try:
                write()
                return True
            except StorageFault as fault:
                if not self.mode.waits_out_faults:
                    raise
                self.hold.hold_for(fault)
            if self.stop_event.wait(self.options.probe_interval):
                return False
