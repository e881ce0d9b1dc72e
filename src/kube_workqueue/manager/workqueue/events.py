"""What a queue call did, told to an optional observer.

An observer is a callable `observer(event, key, detail)`; `event` is one of the string-valued
`Event` members below, `detail` a small dict or None. The queue calls it with its lock held, in the
order things happen, so the observer sees a consistent story; the observer's duty is to be quick
and never to call back into the queue. Without an observer the queue pays one `is None` test.

The names are the vocabulary of the firehose lab (`workqueue lab`): an add either enqueues a
key, is a dedup no-op, or marks a key that a worker holds for redelivery; `done()` redelivers
such a key once.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from typing import Any


class Event(StrEnum):
    ENQUEUED = "enqueued"  # add(): key was absent, now waiting in the FIFO
    DEDUPLICATED = "deduplicated"  # add(): key already dirty, nothing changed; detail["held"]
    MARKED_FOR_REDELIVERY = "marked_for_redelivery"  # add(): a worker holds key; Done re-queues
    REDELIVERED = "redelivered"  # done(): key was re-added meanwhile, back in the FIFO once
    IGNORED_SHUTTING_DOWN = "ignored_shutting_down"  # add() after shut-down
    RATE_LIMITED = "rate_limited"  # add_rate_limited(): detail has attempt and backoff seconds
    DELAYED = "delayed"  # add_after(): detail has the delay in seconds


Observer = Callable[[Event, Any, dict | None], None]
