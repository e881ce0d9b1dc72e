"""The retry policy: every backoff the manager waits, and when an item stops being retried.

One place builds them all, so changing how the manager retries is an edit here:

  * an item whose unit of work failed is retried after `item_backoff` (1 s, doubling per
    consecutive failure, capped at 5 min), up to `max_attempts` attempts in all; then it stays
    failed until someone asks for a re-run (`workqueue retry`);
  * a source that cannot be reached is asked again by the source client after `SOURCE_CALL`
    (0.2 s doubling, a few times within one call), and by the poller at its poll period;
  * a Kubernetes API call answered 429, 5xx or not at all is tried again after `API_CALL`
    (0.2 s doubling, or the server's Retry-After), five times;
  * a broken watch stream or a source that is down at start is reconnected after
    `reconnect(poll_interval)` (0.5 s doubling, capped at the poll period).

Every delay of a `Backoff` is `base · factor**failures`, capped: failures counted from 0.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .ports import State

if TYPE_CHECKING:  # (imported where it is made: a command's parser reads the cap alone)
    from .workqueue import ItemExponentialFailureRateLimiter

_NEEDS_NO_WORK = frozenset({State.SUCCEEDED, State.RUNNING, State.CANCELLED})  # (a lookup a name)


@dataclass(frozen=True)
class Backoff:
    base: float
    cap: float
    factor: float = 2.0

    def delay(self, failures: int) -> float:
        """The wait after `failures` consecutive failures (0: the first retry)."""
        if failures > 1023:  # far past any cap; 2.0 ** 1024 overflows
            return self.cap
        return min(self.base * self.factor**failures, self.cap)

    def delays(self) -> Iterator[float]:
        """base, base·factor, … up to the cap, then the cap forever."""
        failures = 0
        while True:
            yield self.delay(failures)
            failures += 1


ITEM_BACKOFF_CAP = 300.0  # a failed item's longest wait before its retry (5 min)
SOURCE_CALL = Backoff(0.2, 5.0)
API_CALL = Backoff(0.2, 30.0)


def reconnect(poll_interval: float) -> Backoff:
    """Reconnecting to the source (a watch stream, a first listing): quick at first, never
    slower than polling would be."""
    return Backoff(min(0.5, poll_interval), poll_interval)


@dataclass(frozen=True)
class RetryPolicy:
    """How failed items are retried (see the module docstring)."""

    max_attempts: int = 3
    item_backoff: Backoff = field(default_factory=lambda: Backoff(1.0, ITEM_BACKOFF_CAP))

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be >= 1")

    def rate_limiter(self) -> ItemExponentialFailureRateLimiter:
        """The workqueue's per-item limiter: the n-th consecutive failure waits
        `item_backoff.delay(n)`."""
        from .workqueue import ItemExponentialFailureRateLimiter

        return ItemExponentialFailureRateLimiter(self.item_backoff.base, self.item_backoff.cap)

    def gave_up(self, attempts: int) -> bool:
        """True once `attempts` used up every attempt the policy allows."""
        return attempts >= self.max_attempts

    def needs_work(self, state: str, attempts: int) -> bool:
        """Whether an item in `state` after `attempts` attempts is (still) to be run."""
        if state in _NEEDS_NO_WORK:
            return False
        return not (state == State.FAILED and self.gave_up(attempts))
