"""The interface every source ambassador backend implements.

A source answers two questions - which items exist (a sorted list of names) and what one item's
data is - and may push changes to watchers. Another backend (object storage, a message queue)
implements the same methods and the API in api.py serves it unchanged.
"""

from __future__ import annotations

import queue
from typing import Any, Protocol


class Source(Protocol):
    def start(self) -> None:
        """Begin tracking items (initial listing, background refresh)."""

    def stop(self) -> None:
        """Stop background work; idempotent."""

    def page(self, after: str | None, limit: int | None) -> tuple[list[str], int, int]:
        """Sorted names strictly after `after`, at most `limit`; plus the number remaining after
        the page and a version that changes whenever the listing does."""

    def get(self, name: str) -> dict[str, Any] | None:
        """The item's data, or None when `name` is not an item (never raises for bad names)."""

    def subscribe(self) -> tuple[list[str], queue.SimpleQueue]:
        """Current names and a queue of later {"type","item"} events; see unsubscribe."""

    def unsubscribe(self, q: queue.SimpleQueue) -> None: ...

    def ready(self) -> bool:
        """True when the source can list items right now."""

    def __len__(self) -> int: ...

    @property
    def version(self) -> int:
        """The listing's version: it grows with every change (`metadata.resourceVersion`)."""
