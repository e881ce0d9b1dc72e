"""Every cancel of a manager in one place: the items that left the source (`--cancel-removed`).

An item leaves pending in one of two ways: it starts (the reconciler records `ledger.start`) or
it is cancelled. Both happen under `gate`, so a cancel sees an item either still pending - it
is cancelled and never starts - or started, with its run's `Cancel` (`manager.ports.Cancel`)
made in the same step:

    removed(names) ──► pending or failed, waiting to retry   ledger.cancel: it never starts
                 ├───► started here                           its Cancel is set: the backend
                 │                                            ends the work, the reconciler
                 │                                            records the outcome cancelled
                 └───► running elsewhere (a Job another       backend.cancel_elsewhere, then
                       manager left)                          ledger.cancel
    finished items keep their outcome.

A `Cancel` set before the backend took the run up is seen when it does (nothing starts), so no
cancel is ever lost between the start in the ledger and the start of the work, and nobody asks
twice. Backends keep no cancel state of their own: they read their run's `Cancel`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from ..ports import Backend, Cancel, ItemLedger, State

log = logging.getLogger(__name__)


class Cancellations:
    def __init__(self, ledger: ItemLedger, backend: Backend) -> None:
        self.ledger = ledger
        self.backend = backend
        self.gate = threading.Lock()
        # Invariant (under `gate`): the names between their `ledger.start` and the end of
        # their run, each with that run's Cancel.
        self._runs: dict[str, Cancel] = {}

    def started(self, name: str) -> Cancel:
        """The run of `name` was just recorded started: its Cancel. The caller holds `gate`
        (the same step as `ledger.start`); its duty: `ended(name)` when the run is over."""
        cancel = self._runs[name] = Cancel()
        return cancel

    def ended(self, name: str) -> None:
        with self.gate:
            self._runs.pop(name, None)

    def end_runs(self, names: list[str]) -> None:
        """End the runs of `names` under way here (their claims were taken: a shared ledger
        declared this manager dead); each is recorded by its reconciler as it ends."""
        with self.gate:
            to_end = [self._runs[name] for name in names if name in self._runs]
        for cancel in to_end:
            cancel.set()

    def removed(self, names: list[str], needs_work: Callable[[str], bool]) -> list[str]:
        """These items left the source (`manager.runtime.removals` proved it): cancel each as the
        module docstring says. Returns the names recorded cancelled now; a run under way here
        is recorded by its reconciler when it ends."""
        cancelled: list[str] = []
        to_end: list[Cancel] = []
        elsewhere: list[str] = []
        with self.gate:
            for name in names:
                current = self.ledger.state(name)
                if current is None:
                    continue
                if name in self._runs:
                    log.warning("%s left the source: ending its running work", name)
                    to_end.append(self._runs[name])
                elif current[0] == State.RUNNING:
                    elsewhere.append(name)
                elif needs_work(name) and self.ledger.cancel(name):
                    log.warning("%s left the source before it started: cancelled", name)
                    cancelled.append(name)
        for cancel in to_end:  # outside the gate: ending work may take the backend's locks
            cancel.set()
        for name in elsewhere:
            if self.backend.cancel_elsewhere(name) and self.ledger.cancel(name):
                log.warning("%s left the source: its running work was ended", name)
                cancelled.append(name)
        return cancelled
