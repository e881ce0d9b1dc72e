"""What a `--once` run did, item by item, and the wait for its last item.

A `--once` run fixes its targets at the source's first listing (`Manager.run_once`). Every
target gets exactly one terminal result: SKIPPED at once when it needs no work (finished
before), else whatever its unit of work ended as - reported from the workers' threads
through `note`. The run ends when every target has one (`wait_for_all`), or when the manager
is stopped.

Invariant: `results` holds a target's first terminal result and never changes it (a later
report of the same name - a cancel after a failure, say - is kept in `outcomes` only);
`results` and `outcomes` change only under the report's condition, which `wait_for_all`
waits on.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from ..ports import Outcome
from .reconciler import Result

TERMINAL = {
    Result.SUCCEEDED, Result.FAILED, Result.GONE, Result.SKIPPED, Result.CANCELLED,
    Result.ELSEWHERE,
}  # fmt: skip


@dataclass
class RunReport:
    """What a `--once` run did, item by item."""

    targets: list[str]
    results: dict[str, Result] = field(default_factory=dict)
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    started: float = 0.0
    finished: float = 0.0
    interrupted: bool = False
    listed: bool = True  # False: stopped before the source answered its first listing
    # why the run ended with targets left that nothing may run (`cannot_finish`): one line per
    # cause; empty for a run that ended otherwise
    cannot_run: list[str] = field(default_factory=list)
    changed: threading.Condition = field(
        default_factory=threading.Condition, repr=False, compare=False
    )

    def names_with(self, *results: Result) -> list[str]:
        return [n for n in self.targets if self.results.get(n) in results]

    def note(self, name: str, result: Result, outcome: Outcome | None) -> None:
        """A worker's report of `name` (any thread); wakes the run at its last target."""
        with self.changed:
            if outcome is not None:
                self.outcomes[name] = outcome
            if result in TERMINAL and name not in self.results:
                self.results[name] = result
                if len(self.results) >= len(self.targets):
                    self.changed.notify_all()

    def again(self, names: list[str]) -> list[str]:
        """`names` run again in this run (`workqueue retry` while it runs): their results
        forgotten, and each a target; the names that were not settled yet are left out of
        the answer (they run anyway)."""
        with self.changed:
            again = []
            known = set(self.targets)
            for name in names:
                if name not in known:
                    self.targets.append(name)
                if self.results.pop(name, None) is not None or name not in known:
                    self.outcomes.pop(name, None)
                    again.append(name)
            return again

    def wait_for_all(self, stopped: Callable[[], bool], poll: float = 0.5) -> None:
        """Until every target has its result or `stopped()` (looked at every `poll` seconds,
        and at once after `wake`)."""
        with self.changed:
            while len(self.results) < len(self.targets) and not stopped():
                self.changed.wait(poll)

    def wake(self) -> None:
        """Make `wait_for_all` look at `stopped()` now (the manager is stopping)."""
        with self.changed:
            self.changed.notify_all()
