"""procrastinate draining N jobs, printed as one JSON line: {"jobs", "seconds"}.

Run by `bench/fleet.py` in the peers' environment:
    python bench/peers/procrastinate_drain.py DSN N [--concurrency C] [--spawn] [--phase P]
The schema is applied and N jobs deferred in one batch, then one worker drains them
(`wait=False`: it stops when the queue is empty): the time is from its start to its exit. A job
is a no-op coroutine, or (`--spawn`) a process it starts and waits for (`true`, through
asyncio's subprocess). `--phase enqueue` only fills the queue and `--phase drain` only drains
it (the jobs it ran counted), so several worker processes can drain one queue side by side.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import time


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("dsn")
    parser.add_argument("jobs", type=int)
    parser.add_argument("--concurrency", type=int, default=1, help="procrastinate's default: 1")
    parser.add_argument("--spawn", action="store_true", help="each job starts a process")
    parser.add_argument("--phase", choices=("all", "enqueue", "drain"), default="all")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    import procrastinate

    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=args.dsn))
    done = 0
    took = 0.0

    @app.task(name="job")
    async def job() -> None:
        nonlocal done
        if args.spawn:
            process = await asyncio.create_subprocess_exec("true")
            await process.wait()
        done += 1

    async with app.open_async():
        if args.phase in ("all", "enqueue"):
            await app.schema_manager.apply_schema_async()
            await job.batch_defer_async(*([{}] * args.jobs))
        if args.phase in ("all", "drain"):
            began = time.perf_counter()
            await app.run_worker_async(concurrency=args.concurrency, wait=False)
            took = time.perf_counter() - began
    print(json.dumps({"jobs": done, "seconds": took}))


if __name__ == "__main__":
    asyncio.run(main())
