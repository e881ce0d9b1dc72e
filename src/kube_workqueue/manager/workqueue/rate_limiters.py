"""Rate limiters: how long a key must wait before its next try (client-go's RateLimiter).

Every limiter answers three questions, in seconds:
  when(key)          - the delay before `key` may be added again; calling it counts a failure
  forget(key)        - the key succeeded: reset whatever is tracked for it
  num_requeues(key)  - consecutive failures counted for `key` since the last forget

Per-key limiters keep a small counter per failing key and drop it on `forget`: the caller's duty
is to call `forget(key)` when the key succeeds, or the table grows with every key that ever
failed. All limiters are thread-safe.
"""

from __future__ import annotations

import threading
from typing import Any

from .clock import RealClock


class ItemExponentialFailureRateLimiter:
    """`base_delay · 2ⁿ` for the n-th consecutive failure of a key (n from 0), capped."""

    def __init__(self, base_delay: float = 0.005, max_delay: float = 1000.0) -> None:
        if base_delay < 0 or max_delay < 0:
            raise ValueError("delays must be >= 0 seconds")
        self.base_delay = base_delay
        self.max_delay = max_delay
        self._lock = threading.Lock()
        # Invariant: a key is here only while it has failed since its last forget().
        self._failures: dict[Any, int] = {}

    def when(self, key: Any) -> float:
        with self._lock:
            exponent = self._failures.get(key, 0)
            self._failures[key] = exponent + 1
        if exponent > 1023:  # 2.0 ** 1024 overflows a float; far past any cap anyway
            return self.max_delay
        return min(self.base_delay * 2.0**exponent, self.max_delay)

    def num_requeues(self, key: Any) -> int:
        with self._lock:
            return self._failures.get(key, 0)

    def forget(self, key: Any) -> None:
        with self._lock:
            self._failures.pop(key, None)


class ItemFastSlowRateLimiter:
    """`fast_delay` for the first `max_fast_attempts` failures of a key, `slow_delay` after."""

    def __init__(self, fast_delay: float, slow_delay: float, max_fast_attempts: int) -> None:
        self.fast_delay = fast_delay
        self.slow_delay = slow_delay
        self.max_fast_attempts = max_fast_attempts
        self._lock = threading.Lock()
        self._attempts: dict[Any, int] = {}

    def when(self, key: Any) -> float:
        with self._lock:
            attempts = self._attempts.get(key, 0) + 1
            self._attempts[key] = attempts
        return self.fast_delay if attempts <= self.max_fast_attempts else self.slow_delay

    def num_requeues(self, key: Any) -> int:
        with self._lock:
            return self._attempts.get(key, 0)

    def forget(self, key: Any) -> None:
        with self._lock:
            self._attempts.pop(key, None)


class BucketRateLimiter:
    """A token bucket shared by all keys, with reservation semantics (golang.org/x/time/rate).

    The bucket starts full with `burst` tokens and refills at `qps` per second up to `burst`.
    Each `when()` takes one token *now* - going into debt if none is left - and returns how long
    until that token would have existed: with qps=10, burst=100 the first 100 calls return 0,
    the 101st 0.1 s, the 102nd 0.2 s. It smooths thundering herds; it tracks no key.
    """

    def __init__(self, qps: float = 10.0, burst: int = 100, *, clock: Any = None) -> None:
        if qps <= 0 or burst < 1:
            raise ValueError("qps must be > 0 and burst >= 1")
        self.qps = qps
        self.burst = burst
        self.clock = clock if clock is not None else RealClock()
        self._lock = threading.Lock()
        # Invariant: _tokens was the bucket's level at time _last; it may be negative (debt
        # already promised to callers), never above burst.
        self._tokens = float(burst)
        self._last = self.clock.now()

    def when(self, key: Any) -> float:
        with self._lock:
            now = self.clock.now()
            elapsed = max(0.0, now - self._last)
            tokens = min(float(self.burst), self._tokens + elapsed * self.qps) - 1.0
            self._tokens, self._last = tokens, now
        return 0.0 if tokens >= 0 else -tokens / self.qps

    def num_requeues(self, key: Any) -> int:
        return 0

    def forget(self, key: Any) -> None:
        return None


class MaxOfRateLimiter:
    """The longest delay any of its limiters asks for; every limiter sees every call."""

    def __init__(self, *limiters: Any) -> None:
        if not limiters:
            raise ValueError("MaxOfRateLimiter needs at least one limiter")
        self.limiters = limiters

    def when(self, key: Any) -> float:
        return max(limiter.when(key) for limiter in self.limiters)

    def num_requeues(self, key: Any) -> int:
        return max(limiter.num_requeues(key) for limiter in self.limiters)

    def forget(self, key: Any) -> None:
        for limiter in self.limiters:
            limiter.forget(key)


def default_controller_rate_limiter(*, clock: Any = None) -> MaxOfRateLimiter:
    """client-go's default: per-key exponential 5 ms → 1000 s, and 10 qps / burst 100 overall."""
    return MaxOfRateLimiter(
        ItemExponentialFailureRateLimiter(0.005, 1000.0),
        BucketRateLimiter(qps=10.0, burst=100, clock=clock),
    )
