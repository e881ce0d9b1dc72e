"""Distrust sudden emptiness: a listing that loses most of what the manager knew is held, not
acted on, until it persists (`--cancel-removed`).

A Redis without persistence that restarts comes back empty; so does a bucket after a wrong
lifecycle rule, or a folder whose volume was mounted late. Each answers *successfully* with
nothing, and `--cancel-removed` would cancel every waiting item and end every running one at
once - measured: a `FLUSHALL` cancelled 38 waiting items and ended 2 running workers within
1.5 s. Argo CD refuses to prune everything when a source suddenly renders nothing
(`allowEmpty: false`); Kubernetes' garbage collector never deletes on an empty cache. Here:

    one listing removes every item known (at least one),
    or more than `fraction` of them and at least `minimum`   ──►  held: nothing is cancelled or
                                                                  forgotten; status, the
                                                                  dashboard, the log (once) and
                                                                  a metric say why
    while held: later removals join the held ones; items that come back leave them (all back:
    the hold ends and nothing was cancelled); the hold ends by itself once it has lasted `hold`
    seconds (the removals are acted on then), or at once when someone accepts it
    (`workqueue resume --accept-removals`).

An outage is not a removal (a listing that failed never gets here), as before.

A hold outlives its manager: when it begins and ends, `persist(since)` records its start with
the queue's record (`Ledger.hold_removals`), and a manager that starts is given it back
(`restored`). Its first listing is compared with what the ledger says still needs work (a
manager that starts has no listing of its own to compare with: `Removals`' baseline), so what
left the source while the hold stood, or while no manager ran at all, is a removal then - held
on, or acted on once the restored hold has lasted its time.

State: `held` (names withheld), `since` (when the hold began, by `clock`), and `lost` /
`known` (how big the removal was: what the reason says). Invariant: `held` is empty exactly
when `since` is None - but right after a restore, until the first listing says what is held.
The caller serialises calls (the poller's thread, and the accept from `Asked`'s, under
`lock`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable

from ..durations import human, moment

log = logging.getLogger(__name__)


class RemovalGuard:
    def __init__(
        self,
        *,
        fraction: float = 0.5,
        minimum: int = 10,
        hold: float = 300.0,
        clock: Callable[[], float] = time.time,
        changed: Callable[[], None] | None = None,
        persist: Callable[[float | None], None] | None = None,
        restored: float | None = None,
        back: Callable[[list[str]], None] | None = None,
    ) -> None:
        """`changed()` is told when a hold begins or ends (the manager's facts change), outside
        the guard's lock; `persist(since)` records it with the queue (None: no hold);
        `restored`: the start of a hold an earlier manager recorded; `back(names)`: held names
        the source lists again (they run as if never gone), outside the lock."""
        if not 0 <= fraction < 1:
            raise ValueError("the mass-removal fraction must be in [0, 1)")
        self.fraction = fraction
        self.minimum = minimum
        self.hold = hold
        self.clock = clock
        self.changed = changed
        self.persist = persist
        self.back = back
        self.lock = threading.Lock()
        self.held: set[str] = set()
        self.since: float | None = restored
        self.lost = 0
        self.known = 0

    def is_mass(self, lost: int, known: int) -> bool:
        """Whether losing `lost` of `known` items at once is held."""
        if lost <= 0 or known <= 0:
            return False
        return lost >= known or (lost > self.fraction * known and lost >= self.minimum)

    def consider(self, gone: list[str], known: int, listed: Iterable[str]) -> list[str]:
        """A complete listing (its names `listed`) proved `gone` removed, of `known` listed
        before: the names to act on now (sorted); the rest is held."""
        before = self.since
        returned: list[str] = []
        try:
            return self._consider(gone, known, listed, returned)
        finally:
            if (before is None) != (self.since is None):
                self._tell()
            if returned and self.back is not None:
                self.back(sorted(returned))

    def _tell(self) -> None:
        if self.persist is not None:
            self.persist(self.since)
        if self.changed is not None:
            self.changed()

    def _consider(self, gone: list[str], known: int, listed: Iterable[str],
                  returned: list[str]) -> list[str]:  # fmt: skip
        """`consider`, under the lock; the held names listed again are put in `returned`."""
        with self.lock:
            now = self.clock()
            if self.since is not None:
                listed = set(listed)
                returned.extend(self.held & listed)
                self.held.difference_update(listed)  # back in the source: not removed
                self.held.update(gone)
                if not self.lost:  # restored: how big it was is what the first listing says
                    self.lost, self.known = len(self.held), max(known, len(self.held))
                if not self.held:
                    log.info("the held removals came back to the source: nothing was cancelled")
                    self._clear()
                    return []
                if now - self.since >= self.hold:
                    log.warning(
                        "the source has lacked %d item(s) for %s: acting on the held removals",
                        len(self.held),
                        human(now - self.since),
                    )
                    return self._release()
                return []
            if not self.is_mass(len(gone), known):
                return gone
            self.held, self.since, self.lost, self.known = set(gone), now, len(gone), known
            log.warning("%s", self.reason())
            return []

    def accept(self) -> list[str]:
        """Someone accepted the held removals (`workqueue resume --accept-removals`): the names
        to act on now."""
        with self.lock:
            if self.since is None:
                return []
            log.info("the held removals were accepted: acting on %d item(s)", len(self.held))
            names = self._release()
        self._tell()
        return names

    def holds(self, name: str) -> bool:
        """Whether `name` is withheld: it left the source in a held removal (neither started
        nor cancelled until the hold ends)."""
        return name in self.held

    def reason(self) -> str | None:
        """Why removals are held, for people (status, dashboard, log); None when none are."""
        since = self.since
        if since is None:
            return None
        until = (
            f"nothing is cancelled until that has lasted {human(self.hold)} (until "
            f"{moment(since + self.hold)}) or `workqueue resume --accept-removals`"
        )
        if not self.lost:  # restored, before its first listing said how big it is
            held = f" ({len(self.held)} items)" if self.held else ""
            return (f"held: a removal held since {moment(since)}{held} by an earlier run of "
                    f"this queue; {until}")  # fmt: skip
        return f"held: the source lost {self.lost} of {self.known} items at once; {until}"

    def count(self) -> int:
        """How many removals are held now (the metric)."""
        return len(self.held)

    def _release(self) -> list[str]:
        names = sorted(self.held)
        self._clear()
        return names

    def _clear(self) -> None:
        self.held, self.since, self.lost, self.known = set(), None, 0, 0
