"""A server under a bench, over HTTP on 127.0.0.1: started, waited for, timed, weighed.

    free_port()                  a port nobody listens on now
    wait_up(url) / wait_listed   until a URL answers 200 / an ambassador lists as many items
    start_ambassador(root)       `workqueue ambassador` on a folder (2 workers), and the
                                 seconds from its launch to every file listed
    time_raw(port, path, n)      n GETs, each on a new connection read with a bare socket:
                                 the server's time to send, with as little client as possible
    time_requests(session, ...)  n GETs through requests, as a Python client sees them
    percentiles(samples)         median and p95
    wrk_rps(url, seconds)        wrk's requests a second (None without Debian's `wrk`)
    rss_tree_mb(pid)             resident memory of a process and all its descendants

Shared by bench/ambassador.py, bench/object_store.py and bench/startup.py.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import time

import requests

AMBASSADOR = [sys.executable, "-m", "kube_workqueue.manager.cli", "ambassador", "--workers", "2"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_up(url: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if requests.get(url, timeout=5).status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(0.1)
    raise SystemExit(f"server at {url} did not come up")


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[int(0.95 * (len(ordered) - 1))]


def time_raw(port: int, path: str, n: int) -> list[float]:
    """Seconds for `n` GETs of `path`, each on a new connection, read with a plain socket
    into one buffer: the server's time to send, with as little client as possible (requests
    spends more on 18 MB than either server)."""
    out = []
    request = f"GET {path} HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n".encode()
    buffer = bytearray(64 << 20)
    view = memoryview(buffer)
    for _ in range(n):
        start = time.perf_counter()
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(request)
            got = 0
            while True:
                read = sock.recv_into(view[got:])
                if not read:
                    break
                got += read
        out.append(time.perf_counter() - start)
        head = bytes(buffer[: buffer.find(b"\r\n\r\n")])
        assert head.startswith(b"HTTP/1.") and b" 200 " in head.split(b"\r\n")[0], head
    return out


def time_requests(session: requests.Session, url: str, n: int) -> list[float]:
    out = []
    for _ in range(n):
        start = time.perf_counter()
        r = session.get(url, timeout=30)
        _ = r.content
        out.append(time.perf_counter() - start)
        assert r.status_code == 200
    return out


def wrk_rps(url: str, seconds: int) -> float | None:
    if not shutil.which("wrk"):
        return None
    out = subprocess.run(
        ["wrk", "-t1", "-c16", f"-d{seconds}s", url], capture_output=True, text=True, check=True
    ).stdout
    match = re.search(r"Requests/sec:\s+([\d.]+)", out)
    return float(match.group(1)) if match else None


def start_ambassador(root: str, *extra: str) -> tuple[subprocess.Popen, str, float]:
    """`workqueue ambassador` on `root` (2 workers); its URL, and the seconds from launch to
    every file listed (the publisher's scan, publication, a worker's first answer)."""
    expected = sum(1 for e in os.scandir(root) if e.name.endswith(".mp4"))
    port = free_port()
    launched = time.perf_counter()
    proc = subprocess.Popen(
        [*AMBASSADOR, "--root", root, "--port", str(port), "--settle", "0", *extra],
        stdout=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    wait_listed(base, expected)
    return proc, base, time.perf_counter() - launched


def wait_listed(base: str, expected: int, timeout: float = 300) -> None:
    """Until the ambassador at `base` is ready and lists at least `expected` items."""
    wait_up(base + "/readyz", timeout=timeout)
    while True:
        body = requests.get(base + "/api/v1/items?limit=1", timeout=60).json()
        listed = len(body["items"]) + body["metadata"].get("remainingItemCount", 0)
        if listed >= expected:
            return
        time.sleep(0.05)


def rss_tree_mb(pid: int) -> float:
    """RSS of a process and its descendants (the arbiter, the publisher, the workers)."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        with open(f"/proc/{p}/status") as f:
            total += next(int(ln.split()[1]) for ln in f if ln.startswith("VmRSS:"))
        children = subprocess.run(["pgrep", "-P", str(p)], capture_output=True, text=True)
        todo += [int(c) for c in children.stdout.split()]
    return total / 1024
