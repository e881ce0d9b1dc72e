"""Benchmark of the source ambassador: a big folder, many watchers, and peers in the same run.

Prints:
  * a folder of --files files (1,000,000 by default): cold start of `workqueue ambassador`
    (launch to every file listed; goal <= 10 s), its RSS (all processes) against the same
    server on an empty folder, per item (goal <= 300 B), the full listing against the same
    bytes as a static file from `python -m http.server` (goal: at least as fast), and
    GET /api/v1/items?limit=1000 pages (goal p95 <= 10 ms)
  * --watchers concurrent watch streams (1,000): every one must receive the event of a new
    file; delivery p50/p99 from the file's creation (goal p99 <= 1 s), and RSS per idle watcher
  * GET /api/v1/items/<name> under gunicorn with 2 workers, load from wrk in a second process,
    beside a bare gunicorn + Flask "hello" endpoint served the same way (goal ratio >= 0.6)

Run: .venv/bin/python -m bench.ambassador [--files 1000000] [--watchers 1000] [--seconds 10]
                                          [--quick]
wrk comes from Debian's package (`apt-get install wrk`); without it the throughput part is
skipped and says so.
"""

from __future__ import annotations

import argparse
import os
import selectors
import socket
import statistics
import subprocess
import sys
import time

import requests

from bench import parsed, scratch, spread
from bench.serving import (
    free_port,
    percentiles,
    rss_tree_mb,
    start_ambassador,
    time_raw,
    time_requests,
    wait_up,
    wrk_rps,
)

LISTING_ROUNDS = 7  # the full listing against its peers: rounds, each server in turn
LISTING_GETS = 40  # GETs of each server a round
PAGE_GETS = 300  # paged listings timed
SETTLE = 1.0  # seconds a server is left alone before its memory is read
UNREAD_FILES, UNREAD_MARGIN = 100_000, 100  # the folder and the margin of unread watchers
GUARDED = "kube_workqueue.ambassador.guarded_worker.GuardedWorker"


def make_folder(count: int) -> str:
    root = str(scratch("wq-bench-amb-"))
    for i in range(count):
        with open(os.path.join(root, f"clip-{i:06d}.mp4"), "wb"):
            pass
    return root


def serve_hello(port: int, file: str | None = None, guarded: bool = False) -> None:
    """A bare gunicorn + Flask app, configured as the ambassador is (2 gthread workers, or with
    `guarded` the ambassador's own worker class, which reads each head against a deadline and
    size limits before a thread gets it); with `file`, `GET /file` sends it as gunicorn sends
    a file (`wsgi.file_wrapper`: sendfile) with nothing else - this stack's floor for sending
    the same bytes as the full listing."""
    from flask import Flask
    from gunicorn.app.base import BaseApplication

    from kube_workqueue.ambassador.server import THREADS_PER_WORKER

    flask_hello = Flask("hello")

    @flask_hello.get("/hello")
    def index():
        return {"hello": "world"}

    def hello(environ, start_response):
        if file is None or environ.get("PATH_INFO") != "/file":
            return flask_hello(environ, start_response)
        size = os.path.getsize(file)
        start_response("200 OK", [("Content-Type", "application/json"),
                                  ("Content-Length", str(size))])  # fmt: skip
        return environ["wsgi.file_wrapper"](open(file, "rb"))  # noqa: SIM115 - the server closes

    class Hello(BaseApplication):
        def load_config(self):
            for key, value in {
                "bind": f"127.0.0.1:{port}",
                "workers": 2,
                "worker_class": GUARDED if guarded else "gthread",
                "threads": THREADS_PER_WORKER,
                "worker_connections": THREADS_PER_WORKER + 256,
                "loglevel": "warning",
                "accesslog": None,
            }.items():
                self.cfg.set(key, value)

        def load(self):
            return hello

    Hello().run()


def bench_big_folder(files: int, procs: list, reuse: str | None = None) -> str:
    """Cold start, RSS, full listing against a static file, paged listings; returns the URL
    of one item for the throughput part."""
    print(f"making {files:,} files ...", flush=True)
    empty = str(scratch("wq-bench-amb-empty-"))
    proc, _, _ = start_ambassador(empty)
    time.sleep(SETTLE)
    base_rss = rss_tree_mb(proc.pid)
    proc.terminate()
    proc.wait(10)
    # --reuse: a folder of clip-NNNNNN.mp4 files made by an earlier run (kept)
    root = reuse or make_folder(files)
    proc, base, cold = start_ambassador(root)
    procs.append(proc)
    session = requests.Session()
    time_requests(session, base + "/api/v1/items", 4)  # both workers have read the version
    time.sleep(SETTLE)
    rss = rss_tree_mb(proc.pid)
    per_item = (rss - base_rss) * 1024 * 1024 / files
    print(
        f"{files:,} files: cold start {cold:.2f} s (goal <= 10 s); RSS {rss:.0f} MB, "
        f"{base_rss:.0f} MB on an empty folder: {per_item:.0f} B per item (goal <= 300 B)"
    )
    full = session.get(base + "/api/v1/items", timeout=60).content
    static_dir = str(scratch("wq-bench-static-"))
    with open(os.path.join(static_dir, "items.json"), "wb") as f:
        f.write(full)
    static_port = free_port()
    procs.append(
        subprocess.Popen(
            [sys.executable, "-m", "http.server", str(static_port), "--bind", "127.0.0.1"],
            cwd=static_dir,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    )
    wait_up(f"http://127.0.0.1:{static_port}/items.json")
    floor_ports = []
    for guarded in ([], ["--serve-guarded"]):
        floor_ports.append(free_port())
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "bench.ambassador",
                    "--serve-hello",
                    str(floor_ports[-1]),
                    "--serve-file",
                    os.path.join(static_dir, "items.json"),
                    *guarded,
                ]  # fmt: skip
            )
        )
        wait_up(f"http://127.0.0.1:{floor_ports[-1]}/file")
    port = int(base.rsplit(":", 1)[1])
    ours, static, floor, guarded_floor = [], [], [], []
    for _ in range(LISTING_ROUNDS):  # each round: each server in turn, its median
        ours.append(statistics.median(time_raw(port, "/api/v1/items", LISTING_GETS)))
        static.append(statistics.median(time_raw(static_port, "/items.json", LISTING_GETS)))
        floor.append(statistics.median(time_raw(floor_ports[0], "/file", LISTING_GETS)))
        guarded_floor.append(statistics.median(time_raw(floor_ports[1], "/file", LISTING_GETS)))
    print(
        f"full listing ({len(full) / 1e6:.1f} MB), median of {LISTING_GETS} GETs a round, "
        f"{LISTING_ROUNDS} rounds (load {os.getloadavg()[0]:.2f}): ours "
        f"{spread([t * 1000 for t in ours], '.2f')} ms; the same bytes as a static file from "
        f"python -m http.server {spread([t * 1000 for t in static], '.2f')} ms: "
        f"{spread([s / o for s, o in zip(static, ours, strict=True)], '.2f')}x its speed "
        "(goal >= 1); from bare gunicorn sending the file (gthread) "
        f"{spread([t * 1000 for t in floor], '.2f')} ms: "
        f"{spread([f / o for f, o in zip(floor, ours, strict=True)], '.2f')}x; from the "
        "ambassador's own worker class sending the file and nothing else (this stack's floor) "
        f"{spread([t * 1000 for t in guarded_floor], '.2f')} ms: "
        f"{spread([s / g for s, g in zip(static, guarded_floor, strict=True)], '.2f')}x the "
        "static server's speed"
    )
    pages = time_requests(session, base + "/api/v1/items?limit=1000", PAGE_GETS)
    p50, p95 = percentiles(pages)
    print(f"GET /api/v1/items?limit=1000: p50 {p50 * 1000:.1f} ms, p95 {p95 * 1000:.1f} ms "
          "(goal p95 <= 10 ms)")  # fmt: skip
    return base + f"/api/v1/items/clip-{files // 2:06d}.mp4"


def bench_watchers(count: int, procs: list) -> None:
    """`count` watch streams on one ambassador: each must get the event of one new file."""
    root = make_folder(10)
    # every watcher comes from 127.0.0.1: one client, which the server caps at half its
    # watches by default (`--max-watches-per-client`) - here it may hold them all. Each worker
    # takes its share of either cap (half), and the connections do not split evenly between
    # them: twice the count, so whichever worker takes a watcher admits it
    caps = ("--max-watches", str(2 * count), "--max-watches-per-client", str(2 * count))
    proc, base, _ = start_ambassador(root, *caps)
    procs.append(proc)
    time.sleep(SETTLE)
    before = rss_tree_mb(proc.pid)
    port = int(base.rsplit(":", 1)[1])
    selector = selectors.DefaultSelector()
    state: dict[socket.socket, dict] = {}
    request = b"GET /api/v1/items?watch=true HTTP/1.1\r\nHost: bench\r\n\r\n"
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        sock.sendall(request)
        sock.setblocking(False)
        selector.register(sock, selectors.EVENT_READ)
        state[sock] = {"buffer": b"", "ready": False, "got": None, "closed": False}

    def pump(until, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not until() and time.monotonic() < deadline:
            for key, _ in selector.select(0.05):
                try:
                    data = key.fileobj.recv(65536)
                except BlockingIOError:
                    continue
                if not data:  # closed by the server (a refused watch): never readable again
                    selector.unregister(key.fileobj)
                    state[key.fileobj]["closed"] = True
                    continue
                mine = state[key.fileobj]
                mine["buffer"] += data
                mine["ready"] = mine["ready"] or b"clip-000009.mp4" in mine["buffer"]
                if mine["got"] is None and b"new.mp4" in mine["buffer"]:
                    mine["got"] = time.monotonic()

    pump(lambda: all(s["ready"] or s["closed"] for s in state.values()), 120)
    ready = sum(s["ready"] for s in state.values())
    time.sleep(2 * SETTLE)
    idle = rss_tree_mb(proc.pid)
    created = time.monotonic()
    with open(os.path.join(root, "new.mp4"), "wb"):
        pass
    pump(lambda: all(s["got"] or s["closed"] for s in state.values()), 30)
    delays = sorted(s["got"] - created for s in state.values() if s["got"] is not None)
    for sock in state:
        sock.close()
    if not delays:
        print(f"{count:,} watchers: {ready} opened, none received the new file's event")
        return
    p50 = delays[len(delays) // 2]
    p99 = delays[max(0, int(len(delays) * 0.99) - 1)]
    print(
        f"{count:,} watchers on 2 workers: {ready:,} opened, {len(delays):,} received the new "
        f"file's event; delivery from the file's creation p50 {p50:.3f} s, p99 {p99:.3f} s "
        f"(goal p99 <= 1 s); RSS {before:.0f} MB -> {idle:.0f} MB, "
        f"{(idle - before) * 1024 / count:.0f} KB per idle watcher"
    )


def bench_item_get(item_url: str, seconds: int, procs: list) -> None:
    hello_port = free_port()
    procs.append(
        subprocess.Popen(
            [sys.executable, "-m", "bench.ambassador", "--serve-hello", str(hello_port)]
        )
    )
    wait_up(f"http://127.0.0.1:{hello_port}/hello")
    assert requests.get(item_url, timeout=5).status_code == 200
    item = wrk_rps(item_url, seconds)
    hello = wrk_rps(f"http://127.0.0.1:{hello_port}/hello", seconds)
    if item is None or hello is None:
        print("wrk not found: throughput not measured (apt-get install wrk)")
        return
    print(
        f"GET /api/v1/items/<name>, wrk -t1 -c16 against 2 gunicorn workers: "
        f"{item:,.0f} req/s; bare Flask hello: {hello:,.0f} req/s; "
        f"ratio {item / hello:.2f} (goal >= 0.6)"
    )


def bench_unread_watchers(files: int, margin: int) -> None:
    """What a watch stream that never reads costs, on a folder of `files` (its first listing
    goes out a page at a time as the client reads: the cost does not grow with the folder)."""

    from tests.support.abuse import unread_stream_queued, unread_watcher_kb
    from tests.support.servers import Server

    folder = scratch("wq-unread-")
    for i in range(files):
        (folder / f"clip-{i:06d}.mp4").touch()
    for label, query in (("names", "watch=true"), ("view=full", "watch=true&view=full")):
        server = Server(folder, free_port(), ())
        try:
            server.wait_ready()
            print(f"unread watchers on {files:,} files ({label}): "
                  f"{unread_watcher_kb(server, margin, query, warm=min(20, margin)):.0f} KB "
                  f"each at the margin of {margin} "
                  f"(goal <= 50 KB); one stream's queue in the kernel "
                  f"{unread_stream_queued(server.port, query) / 1024:,.0f} KB (its send "
                  f"buffer fixed: 4 MB before)")  # fmt: skip
        finally:
            server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=1_000_000)
    parser.add_argument("--watchers", type=int, default=1_000)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--serve-hello", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--serve-file", help=argparse.SUPPRESS)
    parser.add_argument("--serve-guarded", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--reuse", help="a folder of --files clip-NNNNNN.mp4 files to use")
    args = parsed(parser, {"files": 200, "watchers": 20, "seconds": 1})
    if args.quick and not args.serve_hello:
        global LISTING_ROUNDS, LISTING_GETS, PAGE_GETS, SETTLE, UNREAD_FILES, UNREAD_MARGIN
        LISTING_ROUNDS, LISTING_GETS, PAGE_GETS, SETTLE = 1, 3, 10, 0.0
        UNREAD_FILES, UNREAD_MARGIN = 5_000, 5  # (a stream must queue 64 KB to be measured)
    if args.serve_hello:
        serve_hello(args.serve_hello, args.serve_file, args.serve_guarded)
        return
    procs: list[subprocess.Popen] = []
    try:
        bench_watchers(args.watchers, procs)
        bench_unread_watchers(UNREAD_FILES, UNREAD_MARGIN)
        item_url = bench_big_folder(args.files, procs, args.reuse)
        bench_item_get(item_url, args.seconds, procs)
    finally:
        for p in procs:
            p.terminate()
            p.wait(10)


if __name__ == "__main__":
    main()
