"""What a `--once` run on a shared ledger hears of the items other managers end.

A run's report waits for every one of its targets; the ones another manager of the fleet ran
are noted ELSEWHERE when the ledger's change feed (`refresh`) shows them ended - this manager
never takes them, and without the follower the run would wait for them forever. It looks
every quarter of a second while the manager holds items; the moment it holds nothing (the tail
of a drain, where the run waits only on others' last items) it looks at once, then often, the
pause growing back to the quarter - so a fleet's drain ends within a few hundredths of a
second of its last item, and a long idle wait costs no more looks than before.
"""

from __future__ import annotations

import threading
import time

from ..faults import StorageFault
from ..ports import ClaimsWork, State
from .reconciler import Result

IDLE_FIRST_LOOK = 0.02  # a --once run holding nothing looks at others' ends this soon first


class OthersFollower:
    """A `--once` run on a shared ledger: its targets that other managers run to their end
    are noted ELSEWHERE in its report - this manager never takes them, and the run would
    otherwise wait for them forever. `began` holds what this manager dispatched itself (its
    own report comes from its workers)."""

    def __init__(self, ledger: ClaimsWork, needs_work) -> None:
        """`needs_work(name, state)`: the reconciler's (a failed item out of attempts)."""
        self.ledger = ledger
        self.needs_work = needs_work
        self.began: set[str] = set()

    def follow(self, report, stop: threading.Event, interval: float = 0.25) -> None:
        """Until `stop`: every `interval`, what changed read, each ended target noted - only
        the names the ledger read changed are looked at (`changes`), not every target. The
        tail of a drain is quick: the moment this manager lets go of the last item it held
        (its run now waits only on others'), it looks at once, then every `IDLE_FIRST_LOOK`
        seconds, a quarter longer each round up to `interval` - the drain's last item, ended
        elsewhere, ends this run within a few hundredths of a second (it waited up to a
        quarter of a second), and a long wait costs no more looks than before."""
        ended = (State.SUCCEEDED, State.CANCELLED)
        targets = set(report.targets)
        changed = self.ledger.changes()
        idle_pause: float | None = None  # None: this manager held items at its last look
        while True:
            if self.ledger.holding():
                idle_pause = None
                if self._until_idle(stop, interval):
                    return
            else:
                idle_pause = 0.0 if idle_pause is None else \
                    max(IDLE_FIRST_LOOK, min(interval, idle_pause * 1.25))  # fmt: skip
                if stop.wait(idle_pause):
                    return
            try:
                self.ledger.refresh()
            except StorageFault:
                continue
            with self.ledger.change_lock:
                names = changed & targets
                changed.clear()
                mine = {n for n in names if n in self.began and n not in report.results}
                changed.update(mine)  # this manager runs them: looked at again next round
            for name in names - mine:
                if name in report.results:
                    continue
                current = self.ledger.state(name)
                if current is None:
                    continue
                if current[0] in ended or (
                    current[0] == State.FAILED and not self.needs_work(name, current)
                ):
                    report.note(name, Result.ELSEWHERE, None)

    def _until_idle(self, stop: threading.Event, most: float) -> bool:
        """Wait up to `most` seconds, less once this manager holds nothing (an in-memory look
        every `IDLE_FIRST_LOOK`); whether `stop` was set."""
        deadline = time.monotonic() + most
        while (left := deadline - time.monotonic()) > 0:
            if stop.wait(min(left, IDLE_FIRST_LOOK)):
                return True
            if not self.ledger.holding():
                return False
        return stop.is_set()
