"""The floor under `workqueue run`: a 15-line Python thread pool that runs a command per file.

Run as its own process, like `workqueue run`: list FOLDER, then with `--parallelism` threads run
CMD once per file with WORK_ITEM_FILE naming the file (subprocess, like most hand-written
runners). No queue, no ledger, no item data, no logs, no recovery - so the time is Python
start-up and the spawns, and the gap between this and `workqueue run` is what the manager's
guarantees cost per item.

With `--durable` it also does what `workqueue run` must per item, the least way: three SQLite
transactions in WAL mode (running, its process group, the outcome), a private item file, an
appended log per item, the worker started by posix_spawn in its own session - the floor of a
durable dispatcher from one Python process, without the manager's queue, capacity, retries,
recovery or reporting.

Run: .venv/bin/python -m bench.local_floor FOLDER [--suffix .x] [--parallelism 2]
     [--durable STATE_DIR] [CMD ...]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder")
    parser.add_argument("--suffix", default=".x")
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--durable", metavar="STATE_DIR")
    parser.add_argument("cmd", nargs="*", default=["true"])
    args = parser.parse_args()
    files = sorted(e.path for e in os.scandir(args.folder) if e.name.endswith(args.suffix))
    one = durable(args.durable, args.cmd) if args.durable else plain(args.cmd)

    with ThreadPoolExecutor(args.parallelism) as pool:
        codes = list(pool.map(one, files))
    raise SystemExit(1 if any(codes) else 0)


def plain(cmd: list[str]):
    def one(path: str) -> int:
        env = dict(os.environ, WORK_ITEM_FILE=path)
        return subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL).returncode

    return one


def durable(state: str, cmd: list[str]):
    os.makedirs(os.path.join(state, "logs"), exist_ok=True)
    db = sqlite3.connect(os.path.join(state, "floor.sqlite3"), check_same_thread=False,
                         isolation_level=None)  # fmt: skip
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("CREATE TABLE IF NOT EXISTS items (name TEXT PRIMARY KEY, state TEXT, pgid INT)")
    lock = threading.Lock()
    slots = threading.local()
    program = shutil.which(cmd[0]) or cmd[0]
    base = dict(os.environ)

    def write(sql: str, *params) -> None:
        with lock:
            db.execute(sql, params)

    def one(path: str) -> int:
        name = os.path.basename(path)
        write("INSERT OR REPLACE INTO items VALUES (?, 'running', NULL)", name)
        if not hasattr(slots, "file"):
            slots.file = os.path.join(state, f"item-{threading.get_ident()}.json")
        fd = os.open(slots.file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        os.write(fd, json.dumps({"name": name, "path": path}).encode())
        os.close(fd)
        log = os.open(os.path.join(state, "logs", name + ".log"),
                      os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)  # fmt: skip
        os.write(log, f"=== {name} at {time.time()} ===\n".encode())
        pid = os.posix_spawn(
            program, cmd, {**base, "WORK_ITEM_FILE": slots.file}, setsid=True,
            file_actions=[(os.POSIX_SPAWN_DUP2, log, 1), (os.POSIX_SPAWN_DUP2, log, 2)],
        )  # fmt: skip
        os.close(log)
        write("UPDATE items SET pgid=? WHERE name=?", pid, name)
        code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        write("UPDATE items SET state=? WHERE name=?", "ok" if code == 0 else "bad", name)
        return code

    return one


if __name__ == "__main__":
    main()
