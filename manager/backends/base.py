"""What every backend reports about one unit of work, and the hook it implements.

A backend overrides one method, `run(name, data, attempt, on_started) -> Outcome` (rq's habit:
a backend is a class that overrides one hook). It is called by a reconciler worker thread after
a capacity slot was taken, and returns when the unit of work has ended. `interrupted` means the
manager stopped it (shut-down): the item is not failed and will run again.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Outcome:
    succeeded: bool
    exit_code: int | None = None
    error: str | None = None
    interrupted: bool = False
    log_path: str | None = None
    seconds: float | None = None  # how long it ran (set by the reconciler)
