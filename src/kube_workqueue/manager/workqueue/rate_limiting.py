"""A delaying queue that asks a rate limiter how long a failed key must wait.

The worker pattern it exists for (client-go's `util/workqueue` controllers):

    key, shutdown = q.get()
    if shutdown: return
    try:
        reconcile(key)
    except Exception:
        q.add_rate_limited(key)   # try again after the limiter's backoff
    else:
        q.forget(key)             # success: reset the key's backoff
    finally:
        q.done(key)               # always

`add_rate_limited` only schedules the re-add; the key's one-worker-per-key guarantee still comes
from the underlying `Queue`.
"""

from __future__ import annotations

from typing import Any

from .delaying import DelayingQueue
from .events import Event
from .rate_limiters import default_controller_rate_limiter


class RateLimitingQueue(DelayingQueue):
    """`DelayingQueue` plus `add_rate_limited`, `forget` and `num_requeues`.

    `rate_limiter` defaults to `default_controller_rate_limiter()` on the queue's clock.
    """

    def __init__(self, name: str = "", *, rate_limiter: Any = None, **kwargs: Any) -> None:
        super().__init__(name, **kwargs)
        self.rate_limiter = (
            rate_limiter
            if rate_limiter is not None
            else default_controller_rate_limiter(clock=self.clock)
        )

    def add_rate_limited(self, key: Any) -> float:
        """Add `key` again after the limiter's delay (which counts one more failure).
        Returns the delay in seconds."""
        backoff = self.rate_limiter.when(key)
        if self._observer is not None:
            with self._cond:
                self._observer(
                    Event.RATE_LIMITED,
                    key,
                    {"attempt": self.rate_limiter.num_requeues(key), "backoff": backoff},
                )
        self.add_after(key, backoff)
        return backoff

    def forget(self, key: Any) -> None:
        """The key succeeded: reset its backoff. It does not remove the key from the queue."""
        self.rate_limiter.forget(key)

    def num_requeues(self, key: Any) -> int:
        return self.rate_limiter.num_requeues(key)
