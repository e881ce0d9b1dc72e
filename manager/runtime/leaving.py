"""Items that leave the source, under `--cancel-removed`: between the poller that proves a
removal (`removals.py`) and the cancels that act on it (`cancellation.py`) stands the guard
against sudden emptiness (`removal_guard.py`), and `workqueue resume --accept-removals` lets
what it holds through at once.

    poller ──proved removed──► RemovalGuard ──acted on now──► Cancellations.removed
                                  │ held (most of what was known, at once)      │
                                  └──── after the hold, or accepted ────────────┘
                                                          recorded cancels noted ──► the run

The caller's duties: hand `removed` to the poller as its `on_removed` and `guard` as its guard;
call `accept()` when someone accepts (`Asked.follow_accepts`).
"""

from __future__ import annotations

from collections.abc import Callable

from ..faults import StorageFault
from ..ports import Outcome
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
        *,
        note: Callable[[str, Result, Outcome | None], None],
        fault: Callable[[StorageFault], None],
        changed: Callable[[], None],
    ) -> None:
        """`note(name, CANCELLED, None)` for each cancel recorded; `fault(f)` when the record
        refuses a cancel (the next complete listing tells it again); `changed()` when a hold
        begins or ends (the manager's facts)."""
        self.cancellations = cancellations
        self.needs_work = needs_work
        self.note = note
        self.fault = fault
        self.guard: RemovalGuard | None = None
        if options.cancel_removed and options.removal_hold is not None:
            self.guard = RemovalGuard(
                fraction=options.mass_removal_fraction,
                minimum=options.mass_removal_min,
                hold=options.removal_hold,
                changed=changed,
            )

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
