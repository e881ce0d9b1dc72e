"""The line when the ledger is shared: the dispatcher takes items from the ledger's claims.

With one manager per queue, the line is the manager's own workqueue, fed by its listings. With
many managers on one shared ledger (`ports.ClaimsWork`) each would list the same items in the
same order and reach for the same head - the contention of buildkite/agent-stack-k8s#953,
where 26% of reservations were refused. Here the line is the database's: `ClaimedLine` gives
the dispatcher (`dispatcher.Dispatcher`, unchanged) the workqueue's interface, and

    wait_for_key()   returns when an item is claimed and waiting here, or the ledger has one
                     free to claim (woken by the ledger's notifications, and at least every
                     `POLL_SECONDS` - a retry's backoff ends without a notification)
    get()            called with a capacity slot already held: the next item claimed here,
                     else a claim in ONE statement of as many items as there are free slots
                     (this one and those free beside it, `Capacity.free`) - never more than
                     free slots, so a manager never reserves what it cannot run; claims that
                     wait here longer than `HOLD_SECONDS` for their slot go back to the line

New items are announced to every manager at once; were they all to answer at once, all would
race for the same few items and all but one would come back empty-handed (the contention
the seed measured). The live managers take turns instead: for a moment a new item is only the
claim of the manager whose turn its name gives (the ledger's condition, on every
look and claim), that manager is woken at once (`first_to_answer`), the others
`DEFER_SECONDS` later - by then the item is taken, unless that manager's slots were full.
    add(name)        a listing says `name` needs work: new names are the ledger's already
                     (`Ledger.see`); one parked because the source did not have it is put
                     back in the line
    add_rate_limited(name) / forget(name) / done(name)
                     client-go's duties: a claim that did not start is let go at `done`,
                     claimable again after the item's backoff when it was to be retried

`Heartbeat` is the manager's liveness in the ledger (`manager.fleet.liveness`): on a thread
and a connection of its own it beats every third of the lease, looks at the other managers
every `tick`, lets go of the items of those found dead, settles writes whose answer was lost,
and retries releases that failed. Any fault it meets holds dispatch (`on_fault`: the manager's
`FaultHold`), said once; it never stops until the manager does.

Invariant: `_releases` holds the names whose claim `done` could not let go (the database did
not answer); each heartbeat round retries them. `_ready` holds (name, when claimed) of items
claimed here for slots about to be taken, oldest first.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable

from ..faults import StorageFault
from ..ports import ClaimsWork

log = logging.getLogger(__name__)
POLL_SECONDS = 1.0
# how long a manager whose turn it is not waits before it looks at new items: a little more
# than the turn (`manager.fleet.claims.TURN_SECONDS`), after which they are anyone's
DEFER_SECONDS = 0.3
HOLD_SECONDS = 2.0  # a claim made for a slot about to be taken waits this long for it
MOST_AT_ONCE = 64  # the most items one claim statement takes


class _PerThread(threading.local):
    now = False  # (a thread's own value once it sets one)


class ClaimedLine:
    def __init__(
        self,
        ledger: ClaimsWork,
        rate_limiter,
        free_slots: Callable[[], int] = lambda: 0,
        on_fault: Callable[[StorageFault], None] | None = None,
    ) -> None:
        """`free_slots()`: slots free beside the one a `get` holds (`Capacity.free`);
        `on_fault(fault)`: told when the ledger does not answer (the manager holds dispatch)."""
        self.ledger = ledger
        self.rate_limiter = rate_limiter
        self.free_slots = free_slots
        self.on_fault = on_fault or (lambda fault: None)
        self._cond = threading.Condition()
        self._woken = 0  # bumped by every notification
        self._shutting_down = False
        self._backoffs: dict[str, float] = {}  # name -> seconds before it may be claimed again
        self._releases: dict[str, tuple[float, bool]] = {}
        self._parked_again: list[str] = []
        self._ready: collections.deque[tuple[str, float]] = collections.deque()
        self.claim_seconds: list[float] = []  # each claim's round trip (the bench's p99)
        # per dispatcher thread: whether the finish it just wrote claimed for its slot and
        # found nothing (then `waiting_for_slot` asks no second time)
        self._finish_found_none = _PerThread()
        ledger.on_line_changed(self.wake)
        ledger.claim_with_finishes(self._wanted_with_finish, self._took_with_finish)

    def wake(self, payload: str = "") -> None:
        """A notification: look now when it is this manager's turn (`first_to_answer`), else
        `DEFER_SECONDS` later."""
        if payload and not self.ledger.first_to_answer(payload):
            timer = threading.Timer(DEFER_SECONDS, self._wake_now)
            timer.daemon = True
            timer.start()
            return
        self._wake_now()

    def _wake_now(self) -> None:
        with self._cond:
            self._woken += 1
            self._cond.notify_all()

    # -- the workqueue's interface, as the dispatcher and the manager use it ---------------

    def add(self, name: str) -> None:
        if self.ledger.parked(name):
            with self._cond:
                self._parked_again.append(name)

    def add_rate_limited(self, name: str) -> None:
        self._backoffs[name] = self.rate_limiter.when(name)

    def forget(self, name: str) -> None:
        self.rate_limiter.forget(name)

    def done(self, name: str) -> None:
        ready_in = self._backoffs.pop(name, 0.0)
        if self.ledger.holds(name):
            self._release(name, ready_in, park=False)

    def park(self, name: str) -> None:
        """`name` needs no work (its claim read it fresh), or the source does not have it: out
        of the line until a listing says it needs work again."""
        self._release(name, 0.0, park=True)

    def _release(self, name: str, ready_in: float, *, park: bool) -> None:
        try:
            self.ledger.release(name, ready_in=ready_in, park=park)
        except StorageFault as fault:  # the heartbeat's next round lets it go
            with self._cond:
                self._releases[name] = (ready_in, park)
            self.on_fault(fault)

    def has_waiting(self) -> bool:
        """Whether an item waits here or is free to claim: a round trip to the ledger unless
        one is claimed here already (never a count: that would read every waiting row)."""
        if self._ready:
            return True
        try:
            return bool(self.ledger.waiting())
        except StorageFault as fault:
            self.on_fault(fault)
            return False

    def waiting_for_slot(self) -> bool:
        """For a worker that holds a slot and asks whether to keep it: one item claimed for
        that slot now (True), or none free (False) - claimed with the finish it just wrote
        (no round trip of its own), else one round trip, where asking whether anything waits
        and then claiming it would take two."""
        found_none, self._finish_found_none.now = self._finish_found_none.now, False
        if self._ready:
            return True
        if found_none:  # the finish's claim, a moment ago, found the line empty
            return False
        return self._claim_ahead(1 + self.free_slots())

    def _wanted_with_finish(self) -> int:
        """Asked by the ledger in a finishing worker's thread: the items its finish claims -
        for its slot (kept for the next item) and the free ones - unless some wait here."""
        self._finish_found_none.now = False
        with self._cond:
            if self._ready or self._shutting_down:
                return 0
        return min(MOST_AT_ONCE, 1 + self.free_slots())

    def _took_with_finish(self, names: list[str]) -> None:
        """What the finish claimed: ready for the slots about to be taken."""
        if not names:
            self._finish_found_none.now = True
        self._keep_ready(names)

    def _claim_ahead(self, wanted: int) -> bool:
        """Claim up to `wanted` items (never more than the slots about to be taken: the caller
        counts them) into `_ready`, in one round trip: whether any was claimed."""
        claimed = self._claim(wanted)
        self._keep_ready(claimed)
        return bool(claimed)

    def _claim(self, wanted: int) -> list[str]:
        """One claim statement of up to `wanted` items (at most `MOST_AT_ONCE`), its round trip
        kept for `workqueue_claim_seconds`; [] when the ledger did not answer (told)."""
        began = time.monotonic()
        try:
            claimed = self.ledger.claim(min(MOST_AT_ONCE, wanted))
        except StorageFault as fault:
            self.on_fault(fault)
            return []
        self.claim_seconds.append(time.monotonic() - began)
        if len(self.claim_seconds) > 100_000:
            del self.claim_seconds[:50_000]
        return claimed

    def _keep_ready(self, names: list[str], *, mine: int = 1) -> None:
        """Claimed items for the slots about to be taken: waiting here, oldest first. `mine`:
        how many of them the calling worker takes itself - for the others, waiting workers
        are woken."""
        if not names:
            return
        now = time.monotonic()
        with self._cond:
            self._ready.extend((name, now) for name in names)
            if len(names) > mine:
                self._cond.notify_all()

    def wait_for_key(self) -> bool:
        """Block until an item is claimed here or free to claim (True), or the line is shut
        down (False)."""
        while True:
            with self._cond:
                if self._shutting_down:
                    return False
                if self._ready:
                    return True
                woken = self._woken
            self._finish_found_none.now = False
            self._unpark()
            free = self.free_slots()
            if free > 0:  # claim for the slots free now: one round trip, not a look and a claim
                if self._claim_ahead(free):
                    return True
            else:
                try:
                    if self.ledger.waiting():
                        return True
                except StorageFault as fault:
                    self.on_fault(fault)  # dispatch is held meanwhile
            with self._cond:
                if self._woken == woken and not self._shutting_down:
                    self._cond.wait(POLL_SECONDS)

    def get(self) -> tuple[str | None, bool]:
        """With a capacity slot held: one claimed item, or (None, True) when shut down."""
        while True:
            with self._cond:
                if self._shutting_down:
                    return None, True
                if self._ready:
                    return self._ready.popleft()[0], False
                woken = self._woken
            self._unpark()
            claimed = self._claim(1 + self.free_slots())
            if claimed:
                self._keep_ready(claimed[1:], mine=0)
                return claimed[0], False
            with self._cond:
                if self._woken == woken and not self._shutting_down:
                    self._cond.wait(POLL_SECONDS)

    def shut_down(self) -> None:
        with self._cond:
            self._shutting_down = True
            self._cond.notify_all()

    def _unpark(self) -> None:
        with self._cond:
            names, self._parked_again = self._parked_again, []
        if names:
            try:
                self.ledger.unpark(names)
            except StorageFault:
                with self._cond:
                    self._parked_again.extend(names)

    def tend(self) -> None:
        """The heartbeat's round of the line: releases that failed tried again, claims that
        waited `HOLD_SECONDS` for a slot let go (a paused queue, a lowered parallelism)."""
        with self._cond:
            waiting, self._releases = self._releases, {}
            stale = []
            while self._ready and time.monotonic() - self._ready[0][1] > HOLD_SECONDS:
                stale.append(self._ready.popleft()[0])
        for name, (ready_in, park) in waiting.items():
            self._release(name, ready_in, park=park)
        for name in stale:
            self._release(name, 0.0, park=False)


def claimed_line(ledger: ClaimsWork, rate_limiter, registry=None, *, free_slots=None,
                 on_fault=None) -> ClaimedLine:  # fmt: skip
    """The line of a manager on a shared ledger, its claims' metrics registered in `registry`
    (`views.observe.ClaimsCollector`) when there is one."""
    line = ClaimedLine(ledger, rate_limiter, free_slots or (lambda: 0), on_fault)
    if registry is not None:
        from ..views.observe import ClaimsCollector

        latencies = lambda: list(line.claim_seconds)  # noqa: E731 - read at scrape time
        registry.register(
            ClaimsCollector(ledger.claim_counters, ledger.owner, latencies, ledger.unmet_needs)
        )
    return line


def others_running(backend, ledger: ClaimsWork):
    """What counts against a manager's limit on a shared ledger: its backend's work outside
    it, and - once a parallelism is asked of the queue (`workqueue scale`) - what the other
    managers run, so that the asked number is the whole queue's."""

    def count() -> int:
        others = backend.others_running()
        try:
            if ledger.wanted_parallelism() is not None:
                others += ledger.others_running()
        except StorageFault:
            pass  # dispatch is held meanwhile
        return others

    return count


class Heartbeat:
    """The manager's liveness in the ledger, until `stop` is set (see the module docstring)."""

    def __init__(self, ledger: ClaimsWork, line: ClaimedLine, stop: threading.Event,
                 on_fault: Callable[[StorageFault], None]) -> None:  # fmt: skip
        self.ledger = ledger
        self.line = line
        self.stop = stop
        self.on_fault = on_fault
        # the sweep's cadence: a dead manager's items wait a lease and at most this long
        self.tick = min(max(0.2, ledger.lease / 6), 1.0)
        self._failing = False

    def start(self) -> Heartbeat:
        threading.Thread(target=self.run, name="heartbeat", daemon=True).start()
        return self

    def run(self) -> None:
        while True:
            try:
                self.round()
            except Exception:  # never dies: a bug here must not leave claims to run out
                log.exception("the heartbeat's round failed; trying again")
            if self.stop.wait(self.tick):
                return

    def round(self) -> None:
        try:
            self.ledger.heartbeat_round()
            self.line.tend()
        except StorageFault as fault:
            if not self._failing:
                log.warning("cannot beat this manager's heartbeat: %s", fault.short)
            self._failing = True
            self.on_fault(fault)
        else:
            if self._failing:
                log.info("the shared ledger answers again: this manager beats again")
            self._failing = False
