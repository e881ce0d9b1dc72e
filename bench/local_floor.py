"""The floor under `workqueue run`: a 15-line Python thread pool that runs a command per file.

Run as its own process, like `workqueue run`: list FOLDER, then with `--parallelism` threads run
CMD once per file with WORK_ITEM_FILE naming the file (subprocess, like most hand-written
runners). No queue, no ledger, no item data, no logs, no recovery - so the time is Python
start-up and the spawns, and the gap between this and `workqueue run` is what the manager's
guarantees cost per item.

Run: .venv/bin/python -m bench.local_floor FOLDER [--suffix .x] [--parallelism 2] [CMD ...]
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
    parser.add_argument("cmd", nargs="*", default=["true"])
    args = parser.parse_args()
    files = sorted(e.path for e in os.scandir(args.folder) if e.name.endswith(args.suffix))

    def one(path: str) -> int:
        env = dict(os.environ, WORK_ITEM_FILE=path)
        return subprocess.run(args.cmd, env=env, stdin=subprocess.DEVNULL).returncode

    with ThreadPoolExecutor(args.parallelism) as pool:
        codes = list(pool.map(one, files))
    raise SystemExit(1 if any(codes) else 0)


if __name__ == "__main__":
    main()
