"""One client's attack on an ambassador, from loopback, bounded in count and time: what
`bench/abuse.py` prints and `tests/ambassador/test_hostile_clients.py` runs small.

    watches      N requests `?watch=true` that never read their stream
    slow heads   N sockets that send a request line and one header, then nothing
    long lines   a few request lines of 4 MB
    lists        meanwhile, a names-only listing every 50 ms: each one's latency (an answer
                 that never came counts as its timeout)

Memory is the resident set of the ambassador's processes (its gunicorn master and workers and
the snapshot publisher), summed.
"""

from __future__ import annotations

import socket
import statistics
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import requests


def tree_rss_mb(pid: int) -> float:
    """RSS of `pid` and all its descendants, in MB."""
    total, todo = 0.0, [pid]
    while todo:
        current = todo.pop()
        try:
            for line in Path(f"/proc/{current}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) / 1024
            for task in Path(f"/proc/{current}/task").iterdir():
                children = (task / "children").read_text().split()
                todo.extend(int(c) for c in children)
        except OSError:
            continue
    return total


@dataclass
class Attack:
    watches: int = 3000
    slow_heads: int = 2500
    long_lines: int = 4
    seconds: float = 20.0
    list_timeout: float = 10.0
    latencies: list[float] = field(default_factory=list)
    failures: int = 0
    codes: dict[int, int] = field(default_factory=dict)

    def quantile(self, q: float) -> float | None:
        if not self.latencies:
            return None
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    def summary(self) -> str:
        p50, p99 = self.quantile(0.5), self.quantile(0.99)
        return (
            f"lists during the attack: {len(self.latencies)} asked, {self.failures} failed; "
            f"p50 {p50:.3f} s, p99 {p99:.3f} s"
            if p50 is not None
            else "no list answered"
        )


OPENERS = 8  # threads opening the attack's sockets side by side: all at once, as a script would


def _open(port: int, payload: bytes) -> socket.socket | None:
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a client that barely reads
        s.sendall(payload)
        return s
    except OSError:
        return None


def run(url: str, port: int, attack: Attack) -> Attack:
    """Lists while the attack runs for `attack.seconds`; every attacking socket closed after."""
    held: list[socket.socket] = []
    stop = threading.Event()

    def opener(count: int, payload: bytes):
        def open_them() -> None:
            for _ in range(count):
                if stop.is_set():
                    return
                s = _open(port, payload)
                if s is not None:
                    held.append(s)

        return open_them

    watch = b"GET /api/v1/items?watch=true HTTP/1.1\r\nHost: x\r\n\r\n"
    slow = b"GET /api/v1/items HTTP/1.1\r\nHost: x\r\n"
    openers = [opener(attack.watches // OPENERS, watch) for _ in range(OPENERS)]
    openers += [opener(attack.slow_heads // OPENERS, slow) for _ in range(OPENERS)]

    def long_line() -> None:
        s = _open(port, b"")
        if s is None:
            return
        held.append(s)
        try:
            s.sendall(b"GET /" + b"a" * (4 << 20) + b" HTTP/1.1\r\nHost: x\r\n\r\n")
        except OSError:
            pass  # refused while it was still sending: the point

    def lists() -> None:
        session = requests.Session()
        while not stop.is_set():
            started = time.monotonic()
            try:
                r = session.get(url + "/api/v1/items", timeout=attack.list_timeout)
                attack.codes[r.status_code] = attack.codes.get(r.status_code, 0) + 1
                if r.status_code != 200:
                    attack.failures += 1
            except requests.RequestException:
                attack.failures += 1
                session = requests.Session()
            attack.latencies.append(time.monotonic() - started)
            stop.wait(0.05)

    threads = [threading.Thread(target=f, daemon=True) for f in (*openers, lists)]
    threads += [threading.Thread(target=long_line, daemon=True) for _ in range(attack.long_lines)]
    for t in threads:
        t.start()
    time.sleep(attack.seconds)  # the attack's length (not a wait for anything)
    stop.set()
    for t in threads:
        t.join(attack.list_timeout + 30)
    for s in held:
        try:
            s.close()
        except OSError:
            pass
    return attack


def percent(statistic: float, base: float) -> str:
    return f"{(statistic / base - 1) * 100:+.0f}%" if base else "-"


__all__ = ["Attack", "run", "tree_rss_mb", "percent", "statistics"]


def unread_watcher_kb(server, count: int = 100, query: str = "watch=true",
                      warm: int = 20) -> float:  # fmt: skip
    """What one watch stream that never reads costs the ambassador `server` at the margin
    (RSS of its processes, KB a watcher) - the one way the bench, the docs and the tests
    measure it: `warm` watchers first pay what a first watch costs once in each worker (a
    version's prebuilt lines, its set of names, the threads' first pages), then `count` more
    are opened and the growth is divided among them."""

    def watcher() -> socket.socket:
        s = socket.create_connection(("127.0.0.1", server.port))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # (a reader that never reads)
        s.sendall(f"GET /api/v1/items?{query} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        return s

    from .servers import wait_until

    held = [watcher() for _ in range(warm)]
    try:
        wait_until(lambda: all(map(_answered, held)), timeout=60)
        before = steady_rss_mb(server.process.pid)
        held += [watcher() for _ in range(count)]
        wait_until(lambda: all(map(_answered, held)), timeout=60)  # each stream has begun ...
        after = steady_rss_mb(server.process.pid)  # ... and written what its socket takes
    finally:
        for s in held:
            s.close()
    return (after - before) * 1024 / count


def _answered(s: socket.socket) -> bool:
    """Whether the server has written anything to this (never read) socket yet."""
    try:
        return bool(s.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT))
    except BlockingIOError:
        return False


def steady_rss_mb(pid: int, timeout: float = 60.0) -> float:
    """The RSS of `pid` and its descendants once it holds still: three looks a quarter second
    apart within 1% of each other (what the server does for a request is done by then)."""
    deadline, looks = time.monotonic() + timeout, [tree_rss_mb(pid)]
    while time.monotonic() < deadline:
        time.sleep(0.25)
        looks.append(tree_rss_mb(pid))
        last = looks[-3:]
        if len(last) == 3 and max(last) - min(last) <= 0.01 * max(last):
            return last[-1]
    return looks[-1]


def unread_stream_queued(port: int, query: str = "watch=true&view=full") -> int:
    """The bytes the ambassador on `port` holds queued in the kernel for one watch stream
    whose client never reads, once it holds still (pages queued, then the same count for 11
    looks: the server waits on the socket) - the one way the bench, the docs and the test
    measure it."""
    from .servers import wait_until

    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before its window is set
    try:
        s.connect(("127.0.0.1", port))
        s.sendall(f"GET /api/v1/items?{query} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        looks: list[int] = []

        def held_still() -> bool:
            looks.append(server_send_queue(port, s) or 0)
            return looks[-1] > 64 * 1024 and len(looks) > 10 and len(set(looks[-11:])) == 1

        wait_until(held_still, timeout=60, interval=0.1)
        return looks[-1]
    finally:
        s.close()


def server_send_queue(server_port: int, client: socket.socket) -> int | None:
    """The bytes the server's end of `client`'s connection holds queued for it, not yet taken
    by the client (the kernel's `tx_queue`, /proc/net/tcp); None when that socket is gone."""
    want = (f"{server_port:04X}", f"{client.getsockname()[1]:04X}")
    with open("/proc/net/tcp", encoding="ascii") as table:
        for row in table.readlines()[1:]:
            fields = row.split()
            local, remote = fields[1].split(":")[1], fields[2].split(":")[1]
            if (local, remote) == want:
                return int(fields[4].split(":")[0], 16)
    return None
