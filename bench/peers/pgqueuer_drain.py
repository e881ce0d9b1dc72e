"""PgQueuer draining N no-op jobs, printed as one JSON line: {"jobs", "seconds"}.

Run by `bench/sharing.py` in the peers' environment:
    python bench/peers/pgqueuer_drain.py DSN N [--concurrency C]
The schema is installed, N jobs enqueued in one batch, then one worker drains them
(`QueueExecutionMode.drain`): the time is from the worker's start to its exit.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("dsn")
    parser.add_argument("jobs", type=int)
    parser.add_argument("--concurrency", type=int, default=0, help="0: PgQueuer's default")
    args = parser.parse_args()

    import asyncpg
    from pgqueuer import AsyncpgDriver, Queries, QueueManager
    from pgqueuer.domain import types

    conn = await asyncpg.connect(args.dsn)
    driver = AsyncpgDriver(conn)
    queries = Queries(driver)
    await queries.install()
    await queries.enqueue(["noop"] * args.jobs, [None] * args.jobs, [0] * args.jobs)
    manager = QueueManager(queries)
    done = 0

    @manager.entrypoint("noop")
    async def noop(job) -> None:
        nonlocal done
        done += 1

    began = time.perf_counter()
    limit = args.concurrency or None
    await manager.run(
        mode=types.QueueExecutionMode.drain,
        batch_size=max(1, (limit or 20) // 2),
        max_concurrent_tasks=limit,
    )
    took = time.perf_counter() - began
    await conn.close()
    print(json.dumps({"jobs": done, "seconds": took}))


if __name__ == "__main__":
    asyncio.run(main())
