"""Items that leave the source, under `--cancel-removed`: between the poller that proves a
removal (`removals.py`) and the cancels that act on it (`cancellation.py`) stands the guard
against sudden emptiness (`removal_guard.py`), and `workqueue resume --accept-removals` lets
what it holds through at once.

    poller ──proved removed──► RemovalGuard ──acted on now──► Cancellations.removed
                                  │ held (most of what was known, at once)      │
                                  └──── after the hold, or accepted ────────────┘
                                                          recorded cancels noted ──► the run

A hold outlives the manager: its start is recorded with the queue (`Ledger.hold_removals`) and
restored at the next start, whose first listing is compared with what the ledger says still
needs work (`baseline`). While a hold stands its items are neither started (`withholds`: the
reconciler asks) nor cancelled.

The caller's duties: hand `removed` to the poller as its `on_removed`, `guard` as its guard and
`baseline` as its baseline; call `accept()` when someone accepts (`Asked.follow_accepts`).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ..faults import StorageFault
from ..ports import ItemLedger, Outcome, QueueControls, State
from .cancellation import Cancellations
from .manager_options import ManagerOptions
from .reconciler import Result
from .removal_guard import RemovalGuard


class Leaving:
    def __init__(
        self,
        options: ManagerOptions,
        cancellations: Cancellations,
        needs_work: Callable[[str], bool],
        controls: QueueControls,
        *,
        note: Callable[[str, Result, Outcome | None], None],
        fault: Callable[[StorageFault], None],
        changed: Callable[[], None],
        back: Callable[[list[str]], None] | None = None,
    ) -> None:
        """`controls`: where a hold of removals is recorded with the queue (the ledger's
        `QueueControls` half); `note(name, CANCELLED, None)` for each cancel recorded;
        `fault(f)` when the record refuses a cancel (the next complete listing tells it
        again); `changed()` when a hold begins or ends (the manager's facts); `back(names)`
        when held items are listed again (back in line: they run as if never gone)."""
        self.cancellations = cancellations
        self.controls = controls
        self.needs_work = needs_work
        self.note = note
        self.fault = fault
        self.guard: RemovalGuard | None = None
        # `relist(asked)`: a complete listing begun after `asked`, its removals judged
        # (`Poller.relist_now`); set once the poller exists
        self.relist: Callable[[float], None] | None = None
        if options.cancel_removed and options.removal_hold is not None:
            self.guard = RemovalGuard(
                fraction=options.mass_removal_fraction,
                minimum=options.mass_removal_min,
                hold=options.removal_hold,
                changed=changed,
                persist=self._persist,
                restored=self._restored(),
                back=back,
            )

    @property
    def ledger(self) -> ItemLedger:
        return self.cancellations.ledger

    def _restored(self) -> float | None:
        """The start of a hold an earlier manager recorded (None when it cannot be read: the
        first listing then begins a new one, if what left is most of it)."""
        try:
            return self.controls.removals_held_since()
        except StorageFault:
            return None

    def _persist(self, since: float | None) -> None:
        try:
            self.controls.hold_removals(since)
        except StorageFault as fault:
            self.fault(fault)

    def baseline(self) -> set[str]:
        """What the ledger says still needs work (pending, running, failed with attempts
        left): a manager's first listing is compared with it."""
        names: set[str] = set()
        try:
            for state in (State.PENDING, State.RUNNING, State.FAILED):
                for row in self.ledger.rows(state):
                    if state != State.FAILED or self.needs_work(row.name):
                        names.add(row.name)
        except StorageFault as fault:  # nothing proven: the next listings compare as usual
            self.fault(fault)
            return set()
        return names

    def missing(self, name: str) -> Result | None:
        """The source gave no data for `name` as it was about to start (it emptied under the
        manager, between listings): with the guard, a listing now says what that is - HELD
        when it left with most of the others, CANCELLED when it was proved removed alone;
        None (GONE) when there is no guard, or the listing still names it."""
        if self.guard is None or self.relist is None:
            return None
        self.relist(time.monotonic())
        if self.withholds(name):
            return Result.HELD
        try:
            current = self.ledger.state(name)
        except StorageFault:
            current = None
        if current is not None and current[0] == State.CANCELLED:
            return Result.CANCELLED
        return None

    def withholds(self, name: str) -> bool:
        """Whether `name` is in a held removal: not started, not cancelled, for now."""
        return self.guard is not None and self.guard.holds(name)

    def removed(self, names: list[str]) -> None:
        """These items left the source (proved, and not held): each is cancelled as
        `Cancellations.removed` says; what it recorded now is noted."""
        try:
            for name in self.cancellations.removed(names, self.needs_work):
                self.note(name, Result.CANCELLED, None)
        except StorageFault as fault:  # told again by the next complete listing
            self.fault(fault)

    def accept(self) -> None:
        """`workqueue resume --accept-removals`: the held removals are acted on now."""
        if self.guard is not None:
            names = self.guard.accept()
            if names:
                self.removed(names)

    def reason(self) -> str | None:
        """Why removals are held, for people; None when none are."""
        return self.guard.reason() if self.guard is not None else None

    def count(self) -> int:
        return self.guard.count() if self.guard is not None else 0

    def held_names(self, most: int | None = 1000) -> list[str]:
        """The names held, the first `most` of them (for `status`: which items wait on the
        hold; None: all of them)."""
        if self.guard is None:
            return []
        return sorted(self.guard.held)[:most]
