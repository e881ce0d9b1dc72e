"""Benchmark of manager.workqueue against a minimal queue measured in the same run.

The minimal queue is the least a dedup queue can be in CPython: one lock + condition, a deque and
two sets, no shut-down, no metrics, no observer. Every figure for our Queue is printed beside the
same figure for it, as a ratio (ours / minimal; lower is better, 1.0 is parity). Goals (issue 2):
<= 1.2x with metrics off, <= 1.5x with metrics on; add_after per-item cost grows <= 1.5x from 10k
to 100k items; a drained queue that saw 1,000,000 distinct keys holds < 1 MB.

Run: .venv/bin/python -m bench.workqueue [--quick]
"""

from __future__ import annotations

import argparse
import gc
import random
import threading
import time
import tracemalloc
from collections import deque

from prometheus_client import CollectorRegistry

from manager.workqueue import DelayingQueue, FakeClock, PrometheusMetricsProvider, Queue


class WrappedFifo:
    """A FIFO line strategy in Python methods over a deque: what `ordering.Fifo` was."""

    def __init__(self) -> None:
        self._keys: deque = deque()

    def push(self, key) -> None:
        self._keys.append(key)

    def touch(self, key) -> None:
        pass

    def pop(self):
        return self._keys.popleft()

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self):
        return iter(list(self._keys))


class MinimalQueue:
    """The reference: lock + deque + dirty set + processing set."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._line: deque = deque()
        self._dirty: set = set()
        self._processing: set = set()

    def add(self, key) -> None:
        with self._cond:
            if key in self._dirty:
                return
            self._dirty.add(key)
            if key in self._processing:
                return
            self._line.append(key)
            self._cond.notify()

    def get(self):
        with self._cond:
            while not self._line:
                self._cond.wait()
            key = self._line.popleft()
            self._processing.add(key)
            self._dirty.discard(key)
            return key, False

    def done(self, key) -> None:
        with self._cond:
            self._processing.discard(key)
            if key in self._dirty:
                self._line.append(key)
                self._cond.notify()


def best_of(repeats: int, fn) -> float:
    results = []
    for _ in range(repeats):
        gc.collect()
        results.append(fn())
    return min(results)


def dedup_add_ns(make, n: int) -> float:
    q = make()
    q.add("hot")
    add = q.add
    start = time.perf_counter()
    for _ in range(n):
        add("hot")
    return (time.perf_counter() - start) / n * 1e9


def cycle_ns(make, n: int) -> float:
    q = make()
    add, get, done = q.add, q.get, q.done
    keys = [f"k{i % 64}" for i in range(n)]
    start = time.perf_counter()
    for key in keys:
        add(key)
        got, _ = get()
        done(got)
    return (time.perf_counter() - start) / n * 1e9


def threaded_items_per_s(make, producers: int, consumers: int, per_producer: int) -> float:
    q = make()
    stop = object()

    def produce(p: int) -> None:
        for i in range(per_producer):
            q.add((p, i))

    def consume() -> None:
        while True:
            key, _ = q.get()
            q.done(key)
            if key[0] is stop:
                return

    cs = [threading.Thread(target=consume) for _ in range(consumers)]
    ps = [threading.Thread(target=produce, args=(p,)) for p in range(producers)]
    start = time.perf_counter()
    for t in cs + ps:
        t.start()
    for t in ps:
        t.join()
    for c in range(consumers):
        q.add((stop, c))
    for t in cs:
        t.join()
    return producers * per_producer / (time.perf_counter() - start)


def add_after_us(n: int) -> float:
    """add_after n random delays, release them all (one clock step), then drain with get/done;
    microseconds per item. The clock is fake, so no delay is slept; the figure is heap + queue
    work only. Draining starts once the waiting loop has released everything, so the figure
    does not depend on how the two threads happen to interleave."""
    clock = FakeClock()
    q = DelayingQueue(clock=clock)
    delays = [random.uniform(1, 1000) for _ in range(n)]
    start = time.perf_counter()
    for i, d in enumerate(delays):
        q.add_after(i, d)
    clock.step(1001)
    while len(q) < n:  # let the waiting loop move every due key into the FIFO
        time.sleep(0.0005)
    for _ in range(n):
        key, _ = q.get()
        q.done(key)
    elapsed = time.perf_counter() - start
    q.shut_down()
    return elapsed / n * 1e6


def drained_bytes(n: int) -> int:
    tracemalloc.start()
    q = Queue()
    gc.collect()
    base = tracemalloc.get_traced_memory()[0]
    for i in range(n):
        q.add(f"key-{i}")

    def worker() -> None:  # a worker as the manager runs one: it drains, then waits for more
        while True:
            key, shutdown = q.get()
            if shutdown:
                return
            q.done(key)

    thread = threading.Thread(target=worker, daemon=True)
    thread.start()
    while len(q) or q.processing_count():
        time.sleep(0.01)
    time.sleep(0.05)  # the worker is back in get(), waiting
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - base
    q.shut_down()
    thread.join()
    tracemalloc.stop()
    return held


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller runs (for a smoke check)")
    args = parser.parse_args()
    scale = 10 if args.quick else 1
    repeats = 3 if args.quick else 5

    provider = PrometheusMetricsProvider(CollectorRegistry())
    variants = {
        "minimal": MinimalQueue,
        "ours": Queue,
        "ours+metrics": lambda: Queue("bench", metrics_provider=provider),
    }
    rows = []

    def measure(label: str, fn, unit: str, lower_is_better: bool) -> None:
        figures = {name: best_of(repeats, lambda m=make: fn(m)) for name, make in variants.items()}
        base = figures["minimal"]
        ratio = {name: (v / base if lower_is_better else base / v) for name, v in figures.items()}
        rows.append((label, unit, figures, ratio))

    measure("dedup add", lambda m: dedup_add_ns(m, 1_000_000 // scale), "ns/op", True)
    measure("add+get+done", lambda m: cycle_ns(m, 300_000 // scale), "ns/op", True)
    measure(
        "1 producer / 1 consumer",
        lambda m: threaded_items_per_s(m, 1, 1, 100_000 // scale),
        "items/s",
        False,
    )
    measure(
        "4 producers / 8 consumers",
        lambda m: threaded_items_per_s(m, 4, 8, 25_000 // scale),
        "items/s",
        False,
    )

    print(
        f"{'measure':28} {'unit':8} {'minimal':>10} {'ours':>10} {'ours+metrics':>13}"
        f"  {'ratio':>6} {'ratio+m':>8}"
    )
    for label, unit, fig, ratio in rows:
        print(
            f"{label:28} {unit:8} {fig['minimal']:10,.0f} {fig['ours']:10,.0f} "
            f"{fig['ours+metrics']:13,.0f}  {ratio['ours']:5.2f}x {ratio['ours+metrics']:7.2f}x"
        )

    # What a line strategy written in Python would cost the FIFO (the one `ordering.Fifo` was
    # before it became a deque whose push and pop are C calls), measured beside it
    wrapped = best_of(
        repeats, lambda: cycle_ns(lambda: Queue(order=WrappedFifo()), 300_000 // scale)
    )
    direct = best_of(repeats, lambda: cycle_ns(Queue, 300_000 // scale))
    print(
        f"add+get+done, the FIFO line as a deque {direct:,.0f} ns/op, wrapped in Python methods "
        f"{wrapped:,.0f} ns/op: {wrapped / direct:.2f}x"
    )

    small, large = 10_000 // scale, 100_000 // scale
    us_small = best_of(repeats, lambda: add_after_us(small))
    us_large = best_of(repeats, lambda: add_after_us(large))
    print(
        f"add_after + drain: {small:,} items {us_small:.2f} us/item, {large:,} items "
        f"{us_large:.2f} us/item, growth {us_large / us_small:.2f}x (goal <= 1.5x)"
    )

    keys = 1_000_000 // scale
    held = drained_bytes(keys)
    print(
        f"memory: after {keys:,} distinct keys added and drained the queue holds "
        f"{held / 1024:.1f} KiB (goal < 1 MB)"
    )


if __name__ == "__main__":
    main()
