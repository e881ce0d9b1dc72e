"""Which items left the source, told only from answers that prove it (`--cancel-removed`).

An item has left the source when a complete listing *newer* than one that listed it no longer
lists it, or when the watch stream says DELETED (its events come in the order the source saw
them). Nothing else counts:

  * a listing that failed, or broke off between pages, raised before it got here: the
    poller hands over complete listings only;
  * a listing is ordered by its `metadata.resourceVersion` (the ambassador's snapshot
    version, which only grows while it runs; the oldest page's, for a paged listing). One
    from a source that gives none cannot be ordered, so nothing is ever cancelled from it (a
    warning says so once);
  * a listing whose version is *older* than the last one seen went back in time - the
    ambassador restarted and counts from 1 again, or a second replica answered. It cancels
    nothing; it becomes the new baseline, so the next, newer listing is compared with it;
  * a listing that removes most of what was known at once is held by the `RemovalGuard`
    (`removal_guard.py`) until it persists or someone accepts it;
  * a DELETED event of the watch stream is proved by a listing taken at once (so a mass
    removal, which a stream sends one event at a time, reaches the guard whole);
  * a listing from a source whose items leave only by retention (`metadata.removals:
    retention`: a log whose every record is an item) proves nothing removed (`trimmed`);
  * a manager's first listing has no listing of its own before it: it is compared with what
    the ledger says still needs work (`baseline`) - what left the source while no manager ran,
    or while a hold stood, is removed then (and the guard holds it when it is most of it).

State: `_listed`, the names of the newest listing seen, and `_version`, its resourceVersion.
Invariant: every name in `_listed` was listed at `_version` (or later, by an ADDED event),
so a newer listing without it proves it left. One set of names: the memory of one listing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from .removal_guard import RemovalGuard

log = logging.getLogger(__name__)


class Removals:
    def __init__(self, guard: RemovalGuard | None = None,
                 baseline: Callable[[], set[str]] | None = None) -> None:  # fmt: skip
        """`guard` holds a listing that removes most of what was known (`removal_guard`);
        `baseline()`: the names the ledger says still need work, read at the first listing."""
        self.guard = guard
        self.baseline = baseline
        self._listed: set[str] = set()
        self._version: int | None = None
        self._warned_unordered = False

    def listing(self, names: Iterable[str], version: int | None) -> list[str]:
        """A complete listing at resourceVersion `version`: the names it proves removed
        (listed before, missing now), sorted. The caller's duty: pass only complete listings."""
        current = set(names)
        if version is None:
            if not self._warned_unordered:
                log.warning(
                    "the source gives no resourceVersion with its listings: --cancel-removed "
                    "cannot tell a newer listing from an older one and cancels nothing"
                )
                self._warned_unordered = True
            return []
        previous, before = self._listed, self._version
        if before is not None and version == before:
            # The same version again proves nothing, and may list less: a `view=full` listing
            # leaves out an item whose file went after its version was published. Keeping
            # that as the baseline would hide the removal from the next, newer listing.
            self._listed = previous | current
            return self._held_due(current)
        self._listed, self._version = current, version
        if before is None and self.baseline is not None:  # a manager's first listing
            known = self.baseline()
            self.baseline = None
            gone = sorted(known - current)
            if self.guard is not None:
                return self.guard.consider(gone, len(known), current)
            return gone
        if before is None or version < before:
            if before is not None and version < before:
                log.warning(
                    "the source's listing went back in time (resourceVersion %d after %d: "
                    "restarted?); nothing is cancelled from it",
                    version,
                    before,
                )
            return self._held_due(current)
        gone = sorted(previous - current)
        if self.guard is not None:
            return self.guard.consider(gone, len(previous), current)
        return gone

    def trimmed(self, names: Iterable[str], version: int | None) -> list[str]:
        """A complete listing of a source whose items leave only by its retention (a log
        trimming its oldest records: `metadata.removals`): it is the new baseline and proves
        nothing removed - a trim is never a cancellation. The names it took away, sorted (to
        be said)."""
        current = set(names)
        gone = sorted(self._listed - current) if self._version is not None else []
        self._listed, self._version, self.baseline = current, version, None
        return gone

    def _held_due(self, listed: set[str]) -> list[str]:
        """A listing that proves nothing new still ends a hold that has lasted long enough
        (a source that stays empty publishes no new version)."""
        if self.guard is None:
            return []
        return self.guard.consider([], len(listed), listed)

    def added(self, name: str) -> None:
        """The watch stream said ADDED: the item is listed (as of the stream's newest event)."""
        self._listed.add(name)

    def deleted(self, name: str) -> bool:
        """The watch stream said DELETED: True when the item was known listed - the caller
        then takes a listing, which proves the removal (or not) with everything else that left
        at the same moment, as the guard needs to see it: a stream sends a mass removal one
        event at a time."""
        return name in self._listed
