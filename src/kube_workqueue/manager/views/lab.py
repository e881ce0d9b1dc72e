"""`workqueue lab`: the firehose lab: client-go's workqueue semantics, runnable.

A generator fires adds at a fixed rate onto a few hot keys; workers get/reconcile/done with a
simulated reconcile that sometimes fails (then `add_rate_limited`, else `forget`; always `done`).
Counting is done by the queue's observer hook, so the figures are what the queue itself did:

  enqueued      adds issued by the generator
  adds-total    every add() the queue saw (the generator's plus rate-limited re-adds)
  dedup-noop    adds that found the key already dirty
  rwp-marked    adds that marked a key a worker holds (requeue while processing)
  processed     get/done cycles
  rate-limited  add_rate_limited calls
  adds-absorbed (dedup-noop + rwp-marked) / adds-total

The generator paces itself against the clock in small batches, and the STATS line says when it
fell short of the requested rate. `--slow` prints one line per event, in the lab's words, so the
trio REQUEUE-WHILE-PROCESSING -> DEDUP x N -> REDELIVERY can be watched.
"""

from __future__ import annotations

import itertools
import math
import random
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass

from ..workqueue import Event, RateLimitingQueue, default_controller_rate_limiter

SLOW_DEFAULTS = {"rate": 8.0, "keys": 3, "work_ms": 300.0}


@dataclass
class LabConfig:
    rate: float = 50_000.0
    keys: int = 20
    duration: float = 10.0
    workers: int = 5
    work_ms: float = 5.0
    fail_rate: float = 0.1
    slow: bool = False
    seed: int | None = None


class _Log:
    """Serialises output lines; in slow mode prints every event, else nothing per event."""

    def __init__(self, out, verbose: bool) -> None:
        self.out, self.verbose, self.lock = out, verbose, threading.Lock()

    def line(self, text: str) -> None:
        with self.lock:
            self.out.write(text + "\n")
            self.out.flush()

    def event(self, text: str) -> None:
        if self.verbose:
            self.line(text)


def run_lab(config: LabConfig, out=None) -> dict[str, float]:
    """Run the lab; print progress to `out` (stdout by default); return the final counters."""
    out = out or sys.stdout
    log = _Log(out, config.slow)
    counts: Counter[str] = Counter()
    rng = random.Random(config.seed)
    keys = [f"default/obj-{i}" for i in range(config.keys)]

    def observe(event, key, detail):
        # called with the queue's lock held: count, and in slow mode say what happened
        counts[event] += 1
        if not config.slow:
            return
        if event is Event.DEDUPLICATED:
            where = "marked for redelivery" if detail["held"] else "waiting in the FIFO"
            log.event(f"[DEDUP] key={key} already {where} - Add is a no-op")
        elif event is Event.MARKED_FOR_REDELIVERY:
            log.event(
                f"[REQUEUE-WHILE-PROCESSING] key={key} a worker holds this key - "
                "redelivered exactly once when Done() runs"
            )
        elif event is Event.REDELIVERED:
            log.event(f"[REDELIVERY] key={key} was re-added while processing - Done() re-queued it")
        elif event is Event.RATE_LIMITED:
            log.event(
                f"[RATELIMIT] key={key} attempt={detail['attempt']} "
                f"backoff={detail['backoff'] * 1000:g}ms"
            )

    queue = RateLimitingQueue(
        "lab", rate_limiter=default_controller_rate_limiter(), observer=observe
    )
    seq = itertools.count(1)  # next() on a count is atomic under the GIL
    processed = [0]
    processed_lock = threading.Lock()

    def worker(n: int) -> None:
        wrng = random.Random(None if config.seed is None else config.seed + n)
        while True:
            key, shutdown = queue.get()
            if shutdown:
                return
            s = next(seq)
            log.event(f"[WORKER-{n}] key={key} Get seq={s}")
            time.sleep(config.work_ms / 1000.0)
            failed = wrng.random() < config.fail_rate
            if failed:
                queue.add_rate_limited(key)
                log.event(f"[WORKER-{n}] key={key} Done seq={s} result=ERR -> AddRateLimited")
            else:
                queue.forget(key)
                log.event(f"[WORKER-{n}] key={key} Done seq={s} result=OK -> Forget")
            queue.done(key)
            with processed_lock:
                processed[0] += 1

    threads = [
        threading.Thread(target=worker, args=(n,), daemon=True)
        for n in range(1, config.workers + 1)
    ]
    for t in threads:
        t.start()

    # A long random sequence of key indices, cycled: cheaper per add than a random call.
    picks = [rng.randrange(config.keys) for _ in range(65_536)]
    enqueued = 0
    start = time.monotonic()
    next_stats = start + 1.0
    batch = max(1, int(config.rate / 1000))
    add = queue.add
    while True:
        now = time.monotonic()
        elapsed = now - start
        if elapsed >= config.duration:
            break
        target = int(config.rate * elapsed)
        while enqueued < target:
            end = min(target, enqueued + batch)
            for i in range(enqueued, end):
                if config.slow:
                    log.event(f"[ENQUEUE] key={keys[picks[i & 0xFFFF]]} (generator)")
                add(keys[picks[i & 0xFFFF]])
            enqueued = end
        if now >= next_stats and not config.slow:
            log.line(
                f"[STATS] t={elapsed:4.1f}s depth={len(queue)} enqueued={enqueued:,} "
                f"processed={processed[0]:,}"
            )
            next_stats += 1.0
        time.sleep(0.001 if config.rate >= 1000 else min(0.05, 1.0 / config.rate))
    elapsed = time.monotonic() - start
    queue.shut_down_with_drain()
    for t in threads:
        t.join(timeout=5)

    adds_total = (
        counts[Event.ENQUEUED]
        + counts[Event.DEDUPLICATED]
        + counts[Event.MARKED_FOR_REDELIVERY]
        + counts[Event.IGNORED_SHUTTING_DOWN]
    )
    absorbed = counts[Event.DEDUPLICATED] + counts[Event.MARKED_FOR_REDELIVERY]
    result = {
        "enqueued": enqueued,
        "adds_total": adds_total,
        "dedup_noop": counts[Event.DEDUPLICATED],
        "rwp_marked": counts[Event.MARKED_FOR_REDELIVERY],
        "processed": processed[0],
        "rate_limited": counts[Event.RATE_LIMITED],
        "adds_absorbed": absorbed / adds_total if adds_total else 0.0,
        "achieved_rate": enqueued / elapsed if elapsed else 0.0,
    }
    log.line(
        f"[STATS] enqueued={result['enqueued']:,} adds-total={adds_total:,} "
        f"dedup-noop={result['dedup_noop']:,} rwp-marked={result['rwp_marked']:,} "
        f"processed={result['processed']:,} rate-limited={result['rate_limited']:,} "
        f"| adds-absorbed={math.floor(result['adds_absorbed'] * 10000) / 100:.2f}%"
    )
    achieved = result["achieved_rate"]
    if achieved < 0.95 * config.rate:
        log.line(
            f"[STATS] generator fell short: {achieved:,.0f} adds/s of the "
            f"{config.rate:,.0f} requested"
        )
    else:
        log.line(f"[STATS] generator reached {achieved:,.0f} adds/s (requested {config.rate:,.0f})")
    return result
