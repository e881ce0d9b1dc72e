"""Many producers and many workers at once: one worker per key, and no add is lost.

"No add is lost" is checked as the queue promises it: for every add, some processing of that key
*starts after* the add (a later get of the key), so the latest change is always seen.
"""

from __future__ import annotations

import random
import threading

from kube_workqueue.manager.workqueue import Queue


def test_many_producers_many_workers_one_worker_per_key_and_no_add_lost():
    q = Queue()
    keys = [f"k{i}" for i in range(16)]
    lock = threading.Lock()
    seq = iter(range(10**9))
    holders: dict[str, int] = {}
    violations: list[str] = []
    last_add: dict[str, int] = {}
    last_get: dict[str, int] = {}

    def producer(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(3000):
            key = rng.choice(keys)
            with lock:
                last_add[key] = next(seq)
            q.add(key)

    def worker(n: int) -> None:
        while True:
            key, shutdown = q.get()
            if shutdown:
                return
            with lock:
                last_get[key] = next(seq)
                if key in holders:
                    violations.append(f"{key} held by {holders[key]} and {n}")
                holders[key] = n
            with lock:
                del holders[key]
            q.done(key)

    workers = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    producers = [threading.Thread(target=producer, args=(s,)) for s in range(6)]
    for t in workers + producers:
        t.start()
    for t in producers:
        t.join()
    q.shut_down_with_drain()
    for t in workers:
        t.join(10)
    assert not violations
    for key, added in last_add.items():
        assert last_get.get(key, -1) > added, f"the last add of {key} was never processed"
