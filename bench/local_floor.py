"""The floor under `workqueue run`: what the source contract costs before the manager adds anything.

Run as its own process, like `workqueue run`: serve FOLDER with the same in-process ambassador,
list it, then with `--parallelism` threads fetch each item's data with the same source client
(`GET /api/v1/items/<name>`, the contract) and run `true` once per item. No queue, no ledger, no
WORK_ITEM_FILE, no logs - so the time is Python start-up, the HTTP round trips and the spawns,
and the gap between this and `workqueue run` is the manager's own cost per item.

Run: .venv/bin/python -m bench.local_floor FOLDER [--suffix .x] [--parallelism 2]
"""

from __future__ import annotations

import argparse
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder")
    parser.add_argument("--suffix", default=".x")
    parser.add_argument("--parallelism", type=int, default=2)
    args = parser.parse_args()

    from manager.cli.inprocess import serve_folder
    from manager.source_client import SourceClient

    server = serve_folder(os.path.abspath(args.folder), [args.suffix], settle=0)
    try:
        server.wait_settled()
        client = SourceClient(server.url)

        def one(name: str) -> None:
            if client.get_item(name) is not None:
                subprocess.run(["true"], stdin=subprocess.DEVNULL, start_new_session=True)

        with ThreadPoolExecutor(args.parallelism) as pool:
            list(pool.map(one, client.list_items()))
    finally:
        server.stop()


if __name__ == "__main__":
    main()
