"""How many watch streams a worker serves at once, in all and per client: the rest are refused
with 429 and `Retry-After`, so long-running requests never take the threads that lists and
item reads need.

A watch holds a thread for its whole life (gthread); a list or a get holds one for
milliseconds. 3,000 watches from one script took every thread of today's ambassador, and lists
timed out (10 s, three times in a row). The Kubernetes API server counts long-running requests
apart and never lets them starve the rest; so does this: each gunicorn worker takes at most
`total` watches (`--max-watches`, its share; by default half of its threads) and at
most `per_client` from one address (`--max-watches-per-client`, its share). A client behind a
proxy or a Service's NAT shares the proxy's address - the per-client cap is then the proxy's.

Invariant (under `_lock`): `_active` is the sum of `_by_client`'s values, each > 0.
"""

from __future__ import annotations

import threading

RETRY_AFTER_SECONDS = 5


class WatchSlots:
    def __init__(self, total: int, per_client: int) -> None:
        self.total = total
        self.per_client = per_client
        self._lock = threading.Lock()
        self._active = 0
        self._by_client: dict[str, int] = {}

    def take(self, client: str) -> str | None:
        """A slot for a watch from `client`: None when taken (the caller's duty: `give` it back
        when the stream ends), else why not (`watches`, `watches_per_client`)."""
        with self._lock:
            if self._active >= self.total:
                return "watches"
            held = self._by_client.get(client, 0)
            if held >= self.per_client:
                return "watches_per_client"
            self._active += 1
            self._by_client[client] = held + 1
            return None

    def give(self, client: str) -> None:
        with self._lock:
            held = self._by_client.get(client, 0)
            if held <= 0:
                return
            self._active -= 1
            if held == 1:
                del self._by_client[client]
            else:
                self._by_client[client] = held - 1

    @property
    def active(self) -> int:
        return self._active
