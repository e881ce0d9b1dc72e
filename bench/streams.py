"""The log sources measured against real servers: a Redis stream (redis-server), a NATS
JetStream stream (nats-server) and a Kafka topic (Tansu, a broker speaking Kafka's protocol) -
`python -m bench.streams [--only redis|nats|kafka] [--quick]`.

    cold start   --records retained records (default 1,000,000, every record an item, two
                 short fields each): the ambassador's source started - a full listing, packed -
                 against the server's own Python client reading the same records the same way
                 (redis-py: XRANGE, a thousand a call; nats-py: an ordered consumer;
                 confluent-kafka: a consumer of every partition to its end) and doing
                 nothing with them: the floor. Goal <= 1.5x. And the bytes an item costs: the
                 packed listing's (names and metas) per item, and the process's resident
                 growth per item (goal <= 300 B)
    delay        --rate records a second (default 1,000) for --seconds (default 60), keyed by a
                 field: from each record's append (its time, carried in its name) to its ADDED
                 event at a watcher of the source: p50 and p99 (goal: p99 <= 1 s), on a new
                 stream and on the cold start's million-record one
    over HTTP    the same delay through `workqueue ambassador` (a publisher, two gunicorn
                 workers) and a watch stream read over HTTP, the way a manager reads it: on a
                 new stream and beside the cold start's million records (goal p99 <= 200 ms)
    kill -9      --crash-records records appended at 200 a second through an ambassador process
                 that is killed (`kill -9`, the whole process tree) halfway and started again,
                 a manager running each with a worker that marks its starts: records lost (never
                 started) and run twice, from the marks

One machine, one clock: the records' times and the watcher's are this machine's. Each server,
and how it is filled, appended to, read by its own client and written at a rate, is
`bench/stream_servers.py`'s.
"""

from __future__ import annotations

import argparse
import queue
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import parsed
from bench.stream_servers import KafkaBench, NatsBench, RedisBench
from kube_workqueue.ambassador.sources.registry import resolve, source_type


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


def opened(url: str):
    spec = resolve(url, {})
    kind = source_type(spec.kind)
    kind.check(spec.config)
    source = kind.open(spec.config)
    source.start()
    return source


def cold_start(bench, records: int) -> None:
    bench.fill("cold", records)
    floors = [bench.floor("cold") for _ in range(2)]
    before = rss_bytes()
    began = time.perf_counter()
    source = opened(bench.url("cold", keyed=False))
    took = time.perf_counter() - began
    grown = rss_bytes() - before
    listing = source._listing
    packed = len(listing.names.blob) + len(listing.metas.blob)
    count = len(listing)
    source.stop()
    # the best of two on each side: a machine of two cores shared by the broker, its client's
    # threads and the source moves either by a second from one run to the next
    again = time.perf_counter()
    opened(bench.url("cold", keyed=False)).stop()
    took = min(took, time.perf_counter() - again)
    best = min(floors)
    whole = "all of them" if count == records else f"SHORT by {records - count:,}"
    print(
        f"[{bench.kind}] cold start: {count:,} of {records:,} records listed ({whole}) in "
        f"{took:.2f} s; {bench.client_name} reading them {best:.2f} s ({took / best:.2f}x; "
        "goal <= 1.5x)"
    )
    print(f"[{bench.kind}]   bytes an item: packed listing {packed / count:.0f} B, resident "
          f"growth {grown / count:.0f} B (goal <= 300 B)")  # fmt: skip


def delay(bench, rate: int, seconds: float, log: str = "live") -> None:
    """A writer process appends at `rate` (each record's name carries its time); this process
    serves the log (keyed by `file`) and watches it: each ADDED's delay from that time."""
    bench.append(log, "first.mp4")
    source = opened(bench.url(log, keyed=True))
    _, events = source.subscribe()
    writer = subprocess.Popen(bench.writer(log, rate, seconds))
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
    retained = len(source._listing)
    source.stop()
    delays.sort()
    p99 = delays[int(0.99 * (len(delays) - 1))]
    beside = f"; beside {retained:,} retained items" if log != "live" else ""
    print(f"[{bench.kind}] delay{beside}: {rate:,} records a second for {seconds:.0f} s "
          f"({len(delays):,} seen): p50 {statistics.median(delays) * 1000:.0f} ms, "
          f"p99 {p99 * 1000:.0f} ms (goal: p99 <= 1 s)")  # fmt: skip
    if log == "live" and hasattr(bench, "floor_delay"):
        bare = bench.floor_delay(rate, seconds)
        print(f"[{bench.kind}]   a bare {bench.client_name} consumer, the same writer: p50 "
              f"{statistics.median(bare) * 1000:.0f} ms, p99 "
              f"{bare[int(0.99 * (len(bare) - 1))] * 1000:.0f} ms")  # fmt: skip


def http_delay(bench, rate: int, seconds: float, log: str = "live") -> None:
    """As `delay`, through `workqueue ambassador` (its publisher and two gunicorn workers) and a
    watch stream over HTTP - the path a manager takes: each ADDED's delay from the record's
    time, after the stream's first listing (every retained name) has been read."""
    import json

    import requests

    from tests.support.servers import Server, free_port

    bench.append(log, "first.mp4")
    ambassador = Server(bench.url(log, keyed=True), free_port(), ())
    writer = None
    try:
        ambassador.wait_ready(timeout=600)  # (a million records: the cold start's time)
        stream = requests.get(ambassador.url + "/api/v1/items?watch=true", stream=True,
                              timeout=(5, 30))  # fmt: skip
        lines = stream.iter_lines(chunk_size=1 << 16)
        first = 0
        for line in lines:  # the first listing: every retained name, then the probe
            if not line:
                continue
            first += 1
            if json.loads(line)["item"] == "first.mp4":
                break
        began = time.time()  # (an earlier run's live- records are older: not counted)
        writer = subprocess.Popen(bench.writer(log, rate, seconds))
        delays: list[float] = []
        times: list[float] = []  # each seen record's time, from the writer's start
        expected = int(rate * seconds)
        for line in lines:
            if not line:
                continue
            event = json.loads(line)
            if event["type"] == "ADDED" and event["item"].startswith("live-"):
                written = float(event["item"].rsplit("-", 1)[1].removesuffix(".mp4"))
                if written >= began:
                    delays.append(time.time() - written)
                    times.append(written - began)
                if len(delays) >= expected:
                    break
        stream.close()
    finally:
        if writer is not None:
            writer.wait(60)
        ambassador.stop()
    late = [t for t, d in zip(times, delays, strict=True) if d > 0.2]
    bursts = [t for k, t in enumerate(late) if not k or t - late[k - 1] > 1.0]
    delays.sort()
    p99 = delays[int(0.99 * (len(delays) - 1))]
    beside = f"; beside {first - 1:,} retained items" if log != "live" else ""
    print(f"[{bench.kind}] delay over HTTP (an ambassador, a watch stream){beside}: {rate:,} "
          f"records a second for {seconds:.0f} s ({len(delays):,} seen): p50 "
          f"{statistics.median(delays) * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms "
          "(goal: p99 <= 200 ms)")  # fmt: skip
    where = (f", in {len(bursts)} bursts beginning {', '.join(f'{t:.0f}' for t in bursts[:12])}"
             " s in") if bursts else ""  # fmt: skip
    print(f"[{bench.kind}]   later than 200 ms: {len(late):,} records{where}")


def crash(bench, records: int) -> None:
    """`kill -9` of the ambassador halfway through `records` appended at 200 a second."""
    from tests.support.marks import marking_worker, read_marks
    from tests.support.servers import Server, free_port, wait_until

    folder = Path(tempfile.mkdtemp(prefix="bench-streams-"))
    bench.append("crash", "first.mp4")  # (a stream that is not there is refused at start)
    records += 1
    url, port = bench.url("crash", keyed=True), free_port()
    ambassador = Server(url, port, ())
    ambassador.wait_ready()
    worker, marks = marking_worker(folder, 0.0)
    manager = subprocess.Popen(
        [sys.executable, "-m", "kube_workqueue.manager.cli", "manager", "--source",
         f"http://127.0.0.1:{port}", "--poll-interval", "0.2", "--state-dir",
         str(folder / "state"), "--worker-cmd", str(worker), "--parallelism", "4"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    down = 0.0
    try:
        appended = records - 1
        kill_at, restart_at = appended // 2, min(appended // 2 + 400, appended - 1)
        for i in range(appended):
            bench.append("crash", f"rec-{i:06d}.mp4")
            if i == kill_at:
                began = time.monotonic()
                ambassador.kill_9()
            if i == restart_at:  # up to two seconds of records later, it starts again
                ambassador = Server(url, port, ())
                ambassador.wait_ready()
                down = time.monotonic() - began
            time.sleep(1 / 200)
        starts = lambda: [n for e, _, n in read_marks(marks) if e == "start"]  # noqa: E731
        wait_until(lambda: len(set(starts())) >= records, timeout=300)
    finally:
        manager.send_signal(signal.SIGTERM)
        manager.wait(30)
        ambassador.stop()
    started = starts()
    lost = records - len(set(started))
    twice = len(started) - len(set(started))
    print(
        f"[{bench.kind}] kill -9 of the ambassador halfway ({down:.1f} s down) through "
        f"{records:,} records: {lost} lost, {twice} run twice (from the workers' marks)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--rate", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--crash-records", type=int, default=2000)
    parser.add_argument("--only", choices=("redis", "nats", "kafka"))
    parser.add_argument("--skip", action="append", default=[],
                        choices=("cold", "delay", "http", "crash"))  # fmt: skip
    args = parsed(parser, {"records": 500, "rate": 100, "seconds": 1.0, "crash_records": 100})
    for make in (RedisBench, NatsBench, KafkaBench):
        if args.only and make.kind != args.only:
            continue
        bench = make()
        try:
            if "cold" not in args.skip:
                cold_start(bench, args.records)
            # the same delays again beside the cold start's records (a million of them): the
            # quick form's few hundred say nothing more, and its code is the same
            beside_cold = "cold" not in args.skip and not args.quick
            if "delay" not in args.skip:
                delay(bench, args.rate, args.seconds)
                if beside_cold:
                    delay(bench, args.rate, args.seconds, log="cold")
            if "http" not in args.skip:
                http_delay(bench, args.rate, args.seconds)
                if beside_cold:
                    http_delay(bench, args.rate, args.seconds, log="cold")
            if "crash" not in args.skip:
                crash(bench, args.crash_records)
        finally:
            bench.stop()


if __name__ == "__main__":
    main()
