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

A stream also holds what the kernel queues for its client. Left to TCP's autotuning, a socket's
send buffer grows to `tcp_wmem`'s ceiling (4 MB here), so a client that never read had its
whole first listing made and queued for it: 3.9 MB of the kernel's memory a stream over a
20,000-file folder's full view, and 0.16 s of CPU to make it (120 such streams: 19 s of CPU
and 460 MB that no process's RSS shows). `bound_send_queue` fixes a stream's send buffer at
`SEND_BUFFER_BYTES` instead (the kernel doubles it for its bookkeeping): an unread stream
holds about 0.5 MB queued, and the thread making its lines waits on the socket, costing nothing,
until the client reads. A reader is not slowed on a cluster's network: 0.5 MB in flight
carries 500 MB/s at a millisecond's round trip.

Invariant (under `_lock`): `_active` is the sum of `_by_client`'s values, each > 0.
"""

from __future__ import annotations

import contextlib
import socket
import threading

RETRY_AFTER_SECONDS = 5
SEND_BUFFER_BYTES = 256 * 1024  # a watch stream's socket send buffer (the kernel doubles it)


def bound_send_queue(environ: dict) -> None:
    """Fix the send buffer of the watch stream's socket (`environ`: its WSGI request; gunicorn
    names the socket there) at `SEND_BUFFER_BYTES` - see the module docstring. A server that
    names no socket (a test's client) is left as it is."""
    sock = environ.get("gunicorn.socket")
    if isinstance(sock, socket.socket):
        with contextlib.suppress(OSError):  # (a socket that closed meanwhile: nothing to bound)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER_BYTES)


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
