"""What priorities cost: the line as a FIFO against the line by priority.

    python -m bench.priorities [--items 200000] [--rules 3] [--quick]

Prints, for N waiting items (names like a backlog's):
  * memory a waiting item costs in the dedup queue (tracemalloc: the dirty set plus the line),
    FIFO and by priority;
  * adds and gets a second through the queue (one thread, no metrics), FIFO and by priority
    (priorities spread over 5 levels), and the ratio;
  * the cost a listing pays for priorities (`Prioritizer.listed` over N waiting items with
    `--rules` globs that mostly do not match, against a SQLite ledger): the first listing
    (every priority recorded) and a later one (nothing changed: lookups only).
"""

from __future__ import annotations

import argparse
import tempfile
import time
import tracemalloc

from bench import parsed
from kube_workqueue.manager.backends.local.ledger import open_ledger
from kube_workqueue.manager.priority_rules import Rules
from kube_workqueue.manager.runtime.priorities import Prioritizer
from kube_workqueue.manager.workqueue import Queue
from kube_workqueue.manager.workqueue.ordering import ByPriority


def names_of(n: int) -> list[str]:
    return [f"videos/2026/12/item-{i:07d}.mp4" for i in range(n)]


def memory_per_item(names: list[str], order) -> float:
    tracemalloc.start()
    queue = Queue(order=order() if order else None)
    for name in names:
        queue.add(name)
    used, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return used / len(names)


def throughput(names: list[str], order) -> float:
    queue = Queue(order=order() if order else None)
    start = time.perf_counter()
    for name in names:
        queue.add(name)
    while len(queue):
        key, _ = queue.get()
        queue.done(key)
    return 2 * len(names) / (time.perf_counter() - start)


class Source:
    def __init__(self, ranked: dict[str, int]) -> None:
        self.ranked = ranked

    def listed_priorities(self) -> dict[str, int]:
        return self.ranked


def listing_cost(names: list[str], rules: int) -> tuple[float, float]:
    globs = [(f"urgent-{i}/*", 10 + i) for i in range(rules - 1)] + [("*item-00000*", 5)]
    with tempfile.TemporaryDirectory() as state:
        ledger = open_ledger(state)
        ledger.see(names)
        prioritizer = Prioritizer(Rules(globs), Source({}), ledger, Queue())
        start = time.perf_counter()
        prioritizer.listed(names)
        first = time.perf_counter() - start
        start = time.perf_counter()
        prioritizer.listed(names)
        later = time.perf_counter() - start
        ledger.close()
    return first, later


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=200_000)
    parser.add_argument("--rules", type=int, default=3)
    args = parsed(parser, {"items": 2_000})
    names = names_of(args.items)
    levels = {name: i % 5 for i, name in enumerate(names)}

    def by_priority():
        return ByPriority(levels.__getitem__)

    fifo_bytes = memory_per_item(names, None)
    heap_bytes = memory_per_item(names, by_priority)
    print(f"{args.items:,} waiting items")
    print(f"memory a waiting item   FIFO {fifo_bytes:6.0f} B   by priority {heap_bytes:6.0f} B")
    fifo_rate = throughput(names, None)
    heap_rate = throughput(names, by_priority)
    print(f"adds+gets a second      FIFO {fifo_rate:9,.0f}   by priority {heap_rate:9,.0f}"
          f"   ({heap_rate / fifo_rate:.2f}x)")  # fmt: skip
    first, later = listing_cost(names, args.rules)
    print(f"a listing's priorities  first {first:.2f} s (changes recorded), later {later:.2f} s "
          f"({args.rules} rules, {later / args.items * 1e6:.1f} us an item)")  # fmt: skip


if __name__ == "__main__":
    main()
