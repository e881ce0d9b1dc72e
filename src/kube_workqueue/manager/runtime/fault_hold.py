"""What a manager does when its record cannot be written (`manager.faults.StorageFault`).

    a fault ──► held: the capacity gives no slot (running work goes on), said once
                  ├─ a `--once` run: stop - running work gets its grace, the run ends (exit 3)
                  └─ a long-running manager: every `probe_interval` the record is probed
                     (`Ledger.probe`) and the outcomes kept from it written
                     (`Reconciler.record_unrecorded`); when both succeed, dispatch resumes

The reason is readable while it holds (`reason()`: for the log, the manager's facts that
`status` reads, the dashboard), and the metric `workqueue_storage_fault{kind}` reads `fault`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from ..faults import StorageFault

log = logging.getLogger(__name__)


class FaultHold:
    def __init__(
        self,
        *,
        probe: Callable[[], None],
        record_kept: Callable[[], None],
        kept: Callable[[], int],
        changed: Callable[[], None],
        stop: Callable[[], None],
        stopped: threading.Event,
        probe_interval: float,
        grace: float,
    ) -> None:
        """`probe()` and `record_kept()` raise the fault while it stands; `kept()` counts the
        outcomes still kept from the record; `changed()` is told when dispatch is held or
        resumes (the capacity re-counts, the manager's facts are written again); `stop()`
        ends a `--once` run."""
        self.probe = probe
        self.record_kept = record_kept
        self.kept = kept
        self.changed = changed
        self.stop = stop
        self.stopped = stopped
        self.probe_interval = probe_interval
        self.grace = grace
        self.once = False  # a `--once` run: a fault ends it
        self.shared = False  # a shared ledger: a claim outlives a stopped manager by its lease
        self._lock = threading.Lock()
        self.fault: StorageFault | None = None  # set while held; changed under _lock

    def hold_for(self, fault: StorageFault) -> None:
        """The record cannot be written: hold dispatch and say so once (see the module
        docstring). Later faults while held add nothing."""
        with self._lock:
            if self.fault is not None:
                return
            self.fault = fault
        if self.once:
            log.error("%s: stopping, running work gets %gs to finish", fault.short, self.grace)
            self.changed()
            self.stop()
            return
        log.error("%s", self.reason())
        self.changed()
        threading.Thread(target=self._probe_until_writable, name="probe", daemon=True).start()

    def _changed_to(self, fault: StorageFault) -> None:
        """A probe met another kind of fault than the one held for (the database came back
        read-only, say): that is the reason now, said once."""
        with self._lock:
            if self.fault is None or self.fault.kind == fault.kind:
                return
            self.fault = fault
        log.error("%s", self.reason())
        self.changed()

    def reason(self) -> str | None:
        """Why nothing new starts, for people; None while the manager dispatches."""
        fault = self.fault
        if fault is None:
            return None
        return fault.holding(self.probe_interval)

    def final(self) -> StorageFault | None:
        """The fault that ended a `--once` run, its message saying what becomes of the
        outcomes that could not be recorded; None when none did."""
        fault = self.fault
        if fault is None:
            return None
        left = self.kept()
        lost = "nothing was lost"
        if left and self.shared:  # its ends wait where the work ran: a journal, the Jobs
            lost += (
                f"; {left} item(s) ended whose end could not be recorded: this manager's "
                "next start records it without running it again (if it comes within its "
                "lease; after that another manager runs it)"
            )
        elif left:  # a record on the faulty disk: its work's journal may be lost with it
            lost += f"; {left} item(s) whose end could not be recorded run again at the next start"
        return StorageFault(fault.kind, fault.where, fault.detail, lost=lost)

    def _probe_until_writable(self) -> None:
        while not self.stopped.wait(self.probe_interval):
            try:
                self.probe()
                self.record_kept()
            except StorageFault as fault:
                self._changed_to(fault)
                continue
            with self._lock:
                fault, self.fault = self.fault, None
            log.warning("writes succeed again (it was: %s); dispatching again", fault.short)
            self.changed()
            return
