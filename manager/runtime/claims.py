"""The line when the ledger is shared: the dispatcher takes items from the ledger's claims.

With one manager per queue, the line is the manager's own workqueue, fed by its listings. With
many managers on one shared ledger (`ports.ClaimsWork`) each would list the same items in the
same order and reach for the same head - the contention of buildkite/agent-stack-k8s#953,
where 26% of reservations were refused. Here the line is the database's: `ClaimedLine` gives
the dispatcher (`dispatcher.Dispatcher`, unchanged) the workqueue's interface, and

    wait_for_key()   returns when the ledger has an item free to claim (woken by the
                     ledger's notifications, and at least every `POLL_SECONDS` - a retry's
                     backoff ends without a notification)
    get()            called with a capacity slot already held: claims ONE item (`SKIP
                     LOCKED`: rows a rival is taking are passed over) - so a manager never
                     claims more than it has free slots, and never an item a rival took

New items are announced to every manager at once; were they all to answer at once, all would
race for the same few items and all but one would come back empty-handed (the contention
the seed measured). The live managers take turns instead: for a moment a new item is only the
claim of the manager whose turn its name gives (the ledger's condition, on every
look and claim), that manager is woken at once (`first_to_answer`), the others
`DEFER_SECONDS` later - by then the item is taken, unless that manager's slots were full. A
claim that comes back empty although its snapshot saw free items was refused: a rival was
claiming every one of them at that instant (the ledger counts those).
    add(name)        a listing says `name` needs work: new names are the ledger's already
                     (`Ledger.see`); one parked because the source did not have it is put
                     back in the line
    add_rate_limited(name) / forget(name) / done(name)
                     client-go's duties: a claim that did not start is let go at `done`,
                     claimable again after the item's backoff when it was to be retried

`LeaseKeeper` renews this manager's leases and lets go of those that ran out, every third of
the lease (every second at most), until the manager stops. A round that fails (the database
does not answer) is tried again at the next; a release that failed is retried with it.

Invariant: `_releases` holds the names whose claim `done` could not let go (the database did
not answer); each round of the keeper retries them.
"""

from __future__ import annotations

import logging
import threading
import time

from ..faults import StorageFault
from ..ports import ClaimsWork, State
from .reconciler import Result

log = logging.getLogger(__name__)
POLL_SECONDS = 1.0
# how long a manager whose turn it is not waits before it looks at new items: a little more
# than the turn (`manager.shared.claims.TURN_SECONDS`), after which they are anyone's
DEFER_SECONDS = 0.3


class ClaimedLine:
    def __init__(self, ledger: ClaimsWork, rate_limiter) -> None:
        self.ledger = ledger
        self.rate_limiter = rate_limiter
        self._cond = threading.Condition()
        self._woken = 0  # bumped by every notification
        self._shutting_down = False
        self._backoffs: dict[str, float] = {}  # name -> seconds before it may be claimed again
        self._releases: dict[str, tuple[float, bool]] = {}
        self._parked_again: list[str] = []
        self.claim_seconds: list[float] = []  # each claim's round trip (the bench's p99)
        ledger.on_line_changed(self.wake)

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
        except StorageFault:  # the keeper's next round lets it go
            with self._cond:
                self._releases[name] = (ready_in, park)

    def touch(self, name: str) -> None:
        pass  # the ledger orders its line by the priorities `Ledger.prioritize` recorded

    def use_order(self, order) -> None:
        pass

    def __len__(self) -> int:
        """1 when an item is free to claim, else 0: whether anything waits, as the dispatcher
        asks it (a count of the line would read every waiting row)."""
        try:
            return int(self.ledger.waiting())
        except StorageFault:
            return 0

    def wait_for_key(self) -> bool:
        """Block until an item is free to claim (True) or the line is shut down (False)."""
        while True:
            with self._cond:
                if self._shutting_down:
                    return False
                woken = self._woken
            self._unpark()
            try:
                if self.ledger.waiting():
                    return True
            except StorageFault:
                pass  # the manager holds dispatch meanwhile (its ledger said so too)
            with self._cond:
                if self._woken == woken and not self._shutting_down:
                    self._cond.wait(POLL_SECONDS)

    def get(self) -> tuple[str | None, bool]:
        """With a capacity slot held: one claimed item, or (None, True) when shut down."""
        while True:
            with self._cond:
                if self._shutting_down:
                    return None, True
                woken = self._woken
            self._unpark()
            began = time.monotonic()
            try:
                claimed = self.ledger.claim(1)
            except StorageFault:
                claimed = []
            else:
                self.claim_seconds.append(time.monotonic() - began)
                if len(self.claim_seconds) > 100_000:
                    del self.claim_seconds[:50_000]
            if claimed:
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

    def retry_releases(self) -> None:
        with self._cond:
            waiting, self._releases = self._releases, {}
        for name, (ready_in, park) in waiting.items():
            self._release(name, ready_in, park=park)


def claimed_line(ledger: ClaimsWork, rate_limiter, registry=None) -> ClaimedLine:
    """The line of a manager on a shared ledger, its claims' metrics registered in `registry`
    (`views.observe.ClaimsCollector`) when there is one."""
    line = ClaimedLine(ledger, rate_limiter)
    if registry is not None:
        from ..views.observe import ClaimsCollector

        latencies = lambda: list(line.claim_seconds)  # noqa: E731 - read at scrape time
        registry.register(ClaimsCollector(ledger.claim_counters, ledger.owner, latencies))
    return line


def others_running(backend, ledger: ClaimsWork):
    """What counts against a manager's limit on a shared ledger: its backend's work outside
    it, and - once a parallelism is asked of the queue (`workqueue scale`) - what the other
    managers run, so that the asked number is the whole queue's."""

    def count() -> int:
        others = backend.others_running()
        if ledger.wanted_parallelism() is not None:
            others += ledger.others_running()
        return others

    return count


class LeaseKeeper:
    """Renews the manager's leases until `stop` is set (see the module docstring)."""

    def __init__(self, ledger: ClaimsWork, line: ClaimedLine, stop: threading.Event) -> None:
        self.ledger = ledger
        self.line = line
        self.stop = stop
        # a third of the lease, and at most a second: the sweep that lets go of a dead
        # manager's run-out claims is what stands between them and the line
        self.interval = min(max(0.2, ledger.lease / 3), 1.0)
        self._failing = False

    def start(self) -> LeaseKeeper:
        threading.Thread(target=self.run, name="leases", daemon=True).start()
        return self

    def run(self) -> None:
        while True:
            self.round()
            if self.stop.wait(self.interval):
                return

    def round(self) -> None:
        try:
            self.ledger.keep_leases()
            self.line.retry_releases()
        except StorageFault as fault:
            if not self._failing:
                log.warning("cannot renew this manager's claims: %s", fault.short)
            self._failing = True
        else:
            if self._failing:
                log.info("the shared ledger answers again: claims renewed")
            self._failing = False


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

    def follow(self, report, stop: threading.Event, interval: float = 0.5) -> None:
        """Until `stop`: every `interval`, what changed read, each ended target noted."""
        ended = (State.SUCCEEDED, State.CANCELLED)
        while not stop.wait(interval):
            try:
                self.ledger.refresh()
            except StorageFault:
                continue
            for name in report.targets:
                if name in report.results or name in self.began:
                    continue
                current = self.ledger.state(name)
                if current is None:
                    continue
                if current[0] in ended or (
                    current[0] == State.FAILED and not self.needs_work(name, current)
                ):
                    report.note(name, Result.ELSEWHERE, None)
