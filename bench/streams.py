"""A Redis stream as a source, measured against a real redis-server (`python -m bench.streams`).

    cold start   --records retained records (default 1,000,000, every record an item, two
                 short fields each): the ambassador's source started - a full listing, packed -
                 against redis-py reading the same records the same way (XRANGE, a thousand a
                 call) and doing nothing with them: the floor. Goal <= 1.5x. And the bytes an
                 item costs: the packed listing's (names and metas) per item, and the
                 process's resident growth per item (goal <= 300 B)
    delay        --rate records a second (default 1,000) for --seconds (default 60), keyed: from
                 each record's XADD (its id's millisecond) to its ADDED event at a watcher of
                 the source (the listing that carries it): p50 and p99 (goal: p99 <= 1 s), on
                 a new stream and on the cold start's million-record one

The stream's ids are the server's clock and the watcher reads this machine's: one machine, one
clock.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time

from kube_workqueue.ambassador.sources.registry import resolve, source_type
from tests.support.stores import RedisServer


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


def fill(server: RedisServer, key: str, records: int) -> None:
    import redis

    client = redis.Redis(port=server.port)
    pipe = client.pipeline(transaction=False)
    for i in range(records):
        pipe.xadd(key, {"file": f"clip-{i:07d}.mp4", "width": "320"})
        if i % 10_000 == 9_999:
            pipe.execute()
    pipe.execute()


def opened(url: str):
    spec = resolve(url, {})
    kind = source_type(spec.kind)
    kind.check(spec.config)
    source = kind.open(spec.config)
    source.start()
    return source


def floor(server: RedisServer, key: str) -> float:
    import redis

    client = redis.Redis(port=server.port, decode_responses=True)
    began = time.perf_counter()
    start = "-"
    while True:
        page = client.xrange(key, min=start, max="+", count=1000)
        if len(page) < 1000:
            break
        start = "(" + page[-1][0]
    return time.perf_counter() - began


def cold_start(server: RedisServer, records: int) -> None:
    key = "cold"
    fill(server, key, records)
    floors = [floor(server, key) for _ in range(2)]
    before = rss_bytes()
    began = time.perf_counter()
    source = opened(f"{server.url}?stream={key}")
    took = time.perf_counter() - began
    grown = rss_bytes() - before
    listing = source._listing
    packed = len(listing.names.blob) + len(listing.metas.blob)
    count = len(listing)
    source.stop()
    best = min(floors)
    print(f"cold start: {count:,} records listed in {took:.2f} s; redis-py reading them "
          f"{best:.2f} s ({took / best:.2f}x; goal <= 1.5x)")  # fmt: skip
    print(f"  bytes an item: packed listing {packed / count:.0f} B, resident growth "
          f"{grown / count:.0f} B (goal <= 300 B)")  # fmt: skip


WRITER = """
import sys, time, redis
port, rate, seconds = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
key = sys.argv[4]
client = redis.Redis(port=port)
began = time.monotonic()
for i in range(int(rate * seconds)):
    client.xadd(key, {"file": f"live-{i:07d}-{time.time():.4f}"})
    ahead = began + (i + 1) / rate - time.monotonic()
    if ahead > 0:
        time.sleep(ahead)
"""


def delay(server: RedisServer, rate: int, seconds: float, key: str = "live",
          field: str = "file") -> None:  # fmt: skip
    """A writer process XADDs at `rate` (each record's name carries its time); this process
    serves the stream `key` (keyed by `field`) and watches it: each ADDED's delay from that
    time."""
    import queue
    import subprocess
    import sys

    import redis

    redis.Redis(port=server.port).xadd(key, {"file": "first.mp4"})
    source = opened(f"{server.url}?stream={key}&name={field}")
    _, events = source.subscribe()
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(server.port), str(rate),
                               str(seconds), key])  # fmt: skip
    delays: list[float] = []
    while True:
        try:
            event = events.get(timeout=2.0)
        except queue.Empty:
            if writer.poll() is not None:
                break
            continue
        if event["type"] == "ADDED" and event["item"].startswith("live-"):
            delays.append(time.time() - float(event["item"].rsplit("-", 1)[1]))
    source.unsubscribe(events)
    source.stop()
    delays.sort()
    p99 = delays[int(0.99 * (len(delays) - 1))]
    retained = f"; beside {len(source._listing):,} retained items" if key != "live" else ""
    print(f"delay{retained}: {rate:,} records a second for {seconds:.0f} s "
          f"({len(delays):,} seen): "
          f"p50 {statistics.median(delays) * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms "
          "(goal: p99 <= 1 s)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--rate", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args()
    server = RedisServer()
    try:
        cold_start(server, args.records)
        delay(server, args.rate, args.seconds)
        delay(server, args.rate, args.seconds, key="cold")  # a million retained: the same
    finally:
        server.stop()


if __name__ == "__main__":
    main()
