"""PgQueuer draining N jobs, printed as one JSON line: {"jobs", "seconds"}.

Run by `bench/fleet.py` in the peers' environment:
    python bench/peers/pgqueuer_drain.py DSN N [--concurrency C] [--spawn] [--phase P]
The schema is installed and N jobs enqueued in one batch, then one worker drains them
(`QueueExecutionMode.drain`): the time is from the worker's start to its exit. A job is a
no-op coroutine, or (`--spawn`) a process it starts and waits for (`true`, through asyncio's
subprocess - what a job that runs a program costs). `--phase enqueue` only fills the queue and
`--phase drain` only drains it (the jobs it ran counted), so several workers - processes, as a
fleet's managers are - can drain one queue side by side.
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
    parser.add_argument("--spawn", action="store_true", help="each job starts a process")
    parser.add_argument("--phase", choices=("all", "enqueue", "drain"), default="all")
    args = parser.parse_args()

    import asyncpg
    from pgqueuer import AsyncpgDriver, Queries, QueueManager
    from pgqueuer.domain import types

    conn = await asyncpg.connect(args.dsn)
    queries = Queries(AsyncpgDriver(conn))
    if args.phase in ("all", "enqueue"):
        await queries.install()
        await queries.enqueue(["job"] * args.jobs, [None] * args.jobs, [0] * args.jobs)
    done = 0
    took = 0.0
    if args.phase in ("all", "drain"):
        manager = QueueManager(queries)

        @manager.entrypoint("job")
        async def job(job) -> None:
            nonlocal done
            if args.spawn:
                process = await asyncio.create_subprocess_exec("true")
                await process.wait()
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
