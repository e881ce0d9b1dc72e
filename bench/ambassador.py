"""Benchmark of the source ambassador on a folder of 100,000 files.

Prints:
  * cold scan: FilesystemSource.start() on the folder (goal <= 1.5 s)
  * p50/p95 of GET /api/v1/items?limit=1000 (goal p95 <= 20 ms) and of the full listing
    (goal p95 <= 300 ms), sequential requests over one keep-alive connection
  * GET /api/v1/items/<name> under gunicorn with 2 workers, load from wrk in a second process
    (goal >= 1,000 req/s), beside a bare gunicorn + Flask "hello" endpoint served the same way
    in the same run (goal ratio >= 0.6)

Run: .venv/bin/python -m bench.ambassador [--files 100000] [--seconds 10]
wrk comes from Debian's package (`apt-get install wrk`); without it the throughput part is
skipped and says so.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import requests


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


def make_folder(count: int) -> str:
    root = tempfile.mkdtemp(prefix="wq-bench-amb-")
    for i in range(count):
        with open(os.path.join(root, f"clip-{i:06d}.mp4"), "wb"):
            pass
    return root


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[int(0.95 * (len(ordered) - 1))]


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


def serve_hello(port: int) -> None:
    """A bare gunicorn + Flask app, configured as the ambassador is (2 gthread workers)."""
    from flask import Flask
    from gunicorn.app.base import BaseApplication

    from ambassador.server import THREADS_PER_WORKER

    hello = Flask("hello")

    @hello.get("/hello")
    def index():
        return {"hello": "world"}

    class Hello(BaseApplication):
        def load_config(self):
            for key, value in {
                "bind": f"127.0.0.1:{port}",
                "workers": 2,
                "worker_class": "gthread",
                "threads": THREADS_PER_WORKER,
                "loglevel": "warning",
                "accesslog": None,
            }.items():
                self.cfg.set(key, value)

        def load(self):
            return hello

    Hello().run()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--serve-hello", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_hello:
        serve_hello(args.serve_hello)
        return

    from ambassador.sources import FilesystemSource

    print(f"making {args.files:,} files ...", flush=True)
    root = make_folder(args.files)
    procs = []
    try:
        source = FilesystemSource(root, [".mp4"], settle=0)
        start = time.perf_counter()
        source.start()
        cold = time.perf_counter() - start
        listed = len(source)
        source.stop()
        print(f"cold scan of {listed:,} files: {cold:.2f} s (goal <= 1.5 s)")

        port = free_port()
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "manager.cli",
                    "ambassador",
                    "--root",
                    root,
                    "--port",
                    str(port),
                    "--settle",
                    "0",
                    "--workers",
                    "2",
                ]
            )
        )
        base = f"http://127.0.0.1:{port}"
        wait_up(base + "/readyz")
        session = requests.Session()
        while len(session.get(base + "/api/v1/items?limit=1", timeout=30).json()["items"]) == 0:
            time.sleep(0.1)
        time_requests(session, base + "/api/v1/items", 4)  # warm both workers' caches
        p50, p95 = percentiles(time_requests(session, base + "/api/v1/items?limit=1000", 300))
        print(
            f"GET /api/v1/items?limit=1000: p50 {p50 * 1000:.1f} ms, p95 {p95 * 1000:.1f} ms "
            "(goal p95 <= 20 ms)"
        )
        p50, p95 = percentiles(time_requests(session, base + "/api/v1/items", 60))
        print(
            f"GET /api/v1/items (all {listed:,}): p50 {p50 * 1000:.1f} ms, "
            f"p95 {p95 * 1000:.1f} ms (goal p95 <= 300 ms)"
        )

        hello_port = free_port()
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "bench.ambassador", "--serve-hello", str(hello_port)]
            )
        )
        wait_up(f"http://127.0.0.1:{hello_port}/hello")
        item_url = base + f"/api/v1/items/clip-{args.files // 2:06d}.mp4"
        assert session.get(item_url, timeout=5).status_code == 200
        item = wrk_rps(item_url, args.seconds)
        hello = wrk_rps(f"http://127.0.0.1:{hello_port}/hello", args.seconds)
        if item is None or hello is None:
            print("wrk not found: throughput not measured (apt-get install wrk)")
        else:
            print(
                f"GET /api/v1/items/<name>, wrk -t1 -c16 against 2 gunicorn workers: "
                f"{item:,.0f} req/s (goal >= 1,000); bare Flask hello: {hello:,.0f} req/s; "
                f"ratio {item / hello:.2f} (goal >= 0.6)"
            )
    finally:
        for p in procs:
            p.terminate()
            p.wait(10)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
