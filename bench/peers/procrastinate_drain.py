"""procrastinate draining N no-op jobs, printed as one JSON line: {"jobs", "seconds"}.

Run by `bench/sharing.py` in the peers' environment:
    python bench/peers/procrastinate_drain.py DSN N [--concurrency C]
The schema is applied, N jobs deferred in one batch, then one worker drains them
(`wait=False`: it stops when the queue is empty): the time is from its start to its exit.
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
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    import procrastinate

    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=args.dsn))
    done = 0

    @app.task(name="noop")
    async def noop() -> None:
        nonlocal done
        done += 1

    async with app.open_async():
        await app.schema_manager.apply_schema_async()
        await noop.batch_defer_async(*([{}] * args.jobs))
        began = time.perf_counter()
        await app.run_worker_async(concurrency=args.concurrency, wait=False)
        took = time.perf_counter() - began
    print(json.dumps({"jobs": done, "seconds": took}))


if __name__ == "__main__":
    asyncio.run(main())
