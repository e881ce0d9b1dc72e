"""A dedup work queue with client-go's `util/workqueue` semantics, one idea per module.

queue.py          Queue: dirty set + processing set + line; dedup, one worker per key
ordering.py       the line's order: Fifo, or ByPriority (client-go's Queue[T] strategy)
delaying.py       DelayingQueue: add_after(key, seconds) on a heap and one thread
rate_limiters.py  per-key exponential, fast-slow, token bucket, max-of; the default
rate_limiting.py  RateLimitingQueue: add_rate_limited / forget / num_requeues
metrics.py        client-go's metric names through prometheus-client
events.py         the observer hook: what each call did
clock.py          RealClock and FakeClock: time is injected, never read directly
"""

from .clock import FakeClock, RealClock
from .delaying import DelayingQueue
from .events import Event, Observer
from .metrics import PrometheusMetricsProvider, QueueMetrics
from .queue import Queue
from .rate_limiters import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    ItemFastSlowRateLimiter,
    MaxOfRateLimiter,
    default_controller_rate_limiter,
)
from .rate_limiting import RateLimitingQueue

__all__ = [
    "BucketRateLimiter",
    "DelayingQueue",
    "Event",
    "FakeClock",
    "ItemExponentialFailureRateLimiter",
    "ItemFastSlowRateLimiter",
    "MaxOfRateLimiter",
    "Observer",
    "PrometheusMetricsProvider",
    "Queue",
    "QueueMetrics",
    "RateLimitingQueue",
    "RealClock",
    "default_controller_rate_limiter",
]
