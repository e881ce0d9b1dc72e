"""The shared ledger's own figures, printed (sections of `bench/sharing.py`):

    at rest      10,000 claimed items across 4 managers, nothing moving: the rows the database
                 writes a second - one heartbeat per manager per third of its lease - beside the
                 per-row renewal the ledger did before (its statement, at its cadence, the same
                 run). Goal: proportional to managers, <= 10/s
    ceiling      one thread, claim + start + finish as fast as it goes: one item a claim (the
                 first shape) against up to 32 a claim in one statement. Goal: >= 2x

Every row count is PostgreSQL's own (`pg_stat_user_tables`, its counters flushed first).
"""

from __future__ import annotations

import threading
import time

import psycopg

from bench import postgres_server


def _writes(url: str) -> int:
    """Row writes (inserts, updates, deletes) to the ledger's tables so far."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_force_next_flush()")
        return conn.execute(
            "SELECT coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0)::bigint "
            "FROM pg_stat_user_tables "
            "WHERE schemaname = 'workqueue'"
        ).fetchone()[0]


def at_rest(managers: int = 4, claimed: int = 10_000, seconds: float = 30.0,
            lease: float = 30.0, flush: float = 12.0) -> None:  # fmt: skip
    from kube_workqueue.manager.fleet.database import Database
    from kube_workqueue.manager.fleet.ledger import PostgresLedger
    from kube_workqueue.manager.runtime.claims import ClaimedLine, Heartbeat
    from kube_workqueue.manager.workqueue.rate_limiters import ItemExponentialFailureRateLimiter

    server = postgres_server()
    stop = threading.Event()
    ledgers: list[PostgresLedger] = []
    try:
        url = server.database()
        for index in range(managers):
            ledger = PostgresLedger(Database(url), f"m{index}", lease=lease)
            ledger.join()
            ledgers.append(ledger)
        ledgers[0].see([f"item-{i:06}" for i in range(claimed)])
        for ledger in ledgers:  # each claims its share and starts it: all running, at rest
            while len(ledger._claimed) < claimed // managers:
                ledger.claim(min(64, claimed // managers - len(ledger._claimed)))
            for name in sorted(ledger._claimed):
                ledger.start(name, "log")
        for ledger in ledgers:
            line = ClaimedLine(ledger, ItemExponentialFailureRateLimiter(0.1, 1.0))
            Heartbeat(ledger, line, stop, on_fault=lambda fault: None).start()
        for ledger in ledgers:  # a backend flushes its counters as it closes: the set-up's
            ledger.db.close()  # writes are counted before the window, not in it
        time.sleep(flush)  # (and the heartbeats' own connections flush theirs within 10 s)
        before = _writes(url)
        time.sleep(seconds)
        now = (_writes(url) - before) / seconds
        # the first shape renewed every claimed row each round (a third of the lease, at most
        # every second): its statement, at its cadence, for the same claims
        interval = min(max(0.2, lease / 3), 1.0)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("SET search_path TO workqueue")
            before = _writes(url)
            began = time.monotonic()
            while time.monotonic() - began < seconds / 3:
                for index in range(managers):
                    conn.execute("UPDATE items SET changed = pg_current_xact_id() "
                                 "WHERE owner = %s", (f"m{index}",))  # fmt: skip
                time.sleep(interval)
            renewed = (_writes(url) - before) / (time.monotonic() - began)
        print(f"\nat rest: {claimed:,} claimed items across {managers} managers, lease "
              f"{lease:g}s: {now:.2f} row writes/s (a heartbeat per manager every "
              f"{lease / 3:g}s; goal <= 10/s) against {renewed:,.0f}/s renewing each claimed "
              f"row (the first shape; {renewed / max(now, 0.01):,.0f}x)")  # fmt: skip
    finally:
        stop.set()
        for ledger in ledgers:
            ledger.close()
        server.close()


def ceiling(items: int = 3000, rounds: int = 3) -> None:
    from kube_workqueue.manager.fleet.database import Database
    from kube_workqueue.manager.fleet.ledger import PostgresLedger

    server = postgres_server()
    try:
        rates: dict[int, list[float]] = {1: [], 32: []}
        for _ in range(rounds):  # the two shapes in turn: a drifting machine moves both
            for batch in rates:
                ledger = PostgresLedger(Database(server.database()), "bench")
                ledger.join()
                ledger.see([f"w{i:05}" for i in range(items)])
                began, done = time.perf_counter(), 0
                while names := ledger.claim(batch):
                    for name in names:
                        ledger.start(name, "log")
                        ledger.finish(name, True, 0, None)
                        done += 1
                rates[batch].append(done / (time.perf_counter() - began))
                ledger.close()
        one, many = sorted(rates[1])[rounds // 2], sorted(rates[32])[rounds // 2]
        print(f"\nceiling (one thread, {items:,} items, median of {rounds}): claim + start + "
              f"finish {one:,.0f}/s with one item a claim, {many:,.0f}/s with up to 32 a "
              f"claim: {many / one:.2f}x (goal >= 2x)")  # fmt: skip
    finally:
        server.close()
