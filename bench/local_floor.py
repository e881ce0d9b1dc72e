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

With `--kept` as well, the workers are started by a keeper - a second process, as workqueue's
must be so that a worker outlives a killed manager and its end is still recorded once: each
start goes to it over a Unix socket as a JSON line, it appends the start and the end to its
journal and sends the end back, and the acknowledgement that the ledger has it rides on the
next start (journaled too). The least Python that does the durable steps *and* keeps that
promise; `workqueue run` does these and its queue, retries, recovery and reporting.

With `--shim` as well, the keeper starts each worker through its slot's shim, as workqueue's
keeper does (`manager/backends/local/shim.py`): a process forked once a slot, handed each
worker's start with the log's descriptor after the journal line, which posix_spawns it, waits,
writes its end to the slot's file and tells the keeper - so a worker's end is known even when
the keeper dies. The floor of the promise as workqueue keeps it.

With `--ledger URL` as well (a PostgreSQL database), the durable steps go to a table there,
shared by every process run with the same URL - the floor of a fleet's manager: each process
lists the folder into the table (names already there are left alone), and each of its threads,
on a connection of its own, takes the next free item and marks it running in ONE statement
(`FOR UPDATE SKIP LOCKED`: never one item twice), runs it (through the keeper when `--kept`)
and writes its end - two autocommitted statements an item, the least that records a start
before the worker runs and the end after it. No leases, no heartbeats, no turns, no retries.

Run: .venv/bin/python -m bench.local_floor FOLDER [--suffix .x] [--parallelism 2]
     [--durable STATE_DIR [--kept [--shim]] [--ledger URL]] [CMD ...]
"""

from __future__ import annotations

import argparse
import json
import os
import select
import shutil
import signal
import socket
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
    parser.add_argument("--kept", action="store_true")
    parser.add_argument("--shim", action="store_true", help="with --kept: a shim per slot")
    parser.add_argument("--ledger", metavar="URL", help="with --durable: PostgreSQL, shared")
    parser.add_argument("cmd", nargs="*", default=["true"])
    args = parser.parse_args()
    files = sorted(e.path for e in os.scandir(args.folder) if e.name.endswith(args.suffix))
    keeper = Keeper(args.durable, args.cmd, shim=args.shim) if args.kept else None
    if args.ledger:
        codes = shared(args.ledger, args.durable, args.cmd, keeper, files, args.parallelism)
    else:
        one = durable(args.durable, args.cmd, keeper) if args.durable else plain(args.cmd)
        with ThreadPoolExecutor(args.parallelism) as pool:
            codes = list(pool.map(one, files))
    if keeper is not None:
        keeper.close()
    raise SystemExit(1 if any(codes) else 0)


def plain(cmd: list[str]):
    def one(path: str) -> int:
        env = dict(os.environ, WORK_ITEM_FILE=path)
        return subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL).returncode

    return one


def durable(state: str, cmd: list[str], keeper: Keeper | None = None):
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
        log_path = os.path.join(state, "logs", name + ".log")
        if keeper is not None:
            code = keeper.run(name, log_path, slots.file)
            write("UPDATE items SET state=? WHERE name=?", "ok" if code == 0 else "bad", name)
            keeper.acked(name)
            return code
        log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
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


LEDGER_TABLE = (
    "CREATE TABLE IF NOT EXISTS floor_items (name text PRIMARY KEY, seq bigserial, "
    "state text NOT NULL DEFAULT 'pending', owner text, attempts int NOT NULL DEFAULT 0, "
    "started timestamptz, finished timestamptz, exit_code int, log_path text); "
    "CREATE INDEX IF NOT EXISTS floor_line ON floor_items (seq) WHERE state = 'pending'"
)
TAKE = (  # the next free item, marked running by this process: one statement
    "UPDATE floor_items SET state = 'running', owner = %(me)s, attempts = attempts + 1, "
    "started = clock_timestamp(), log_path = %(logs)s || name || '.log' WHERE name = "
    "(SELECT name FROM floor_items WHERE state = 'pending' ORDER BY seq LIMIT 1 "
    "FOR UPDATE SKIP LOCKED) RETURNING name"
)
END = (  # fenced on the owner: only the process that took it writes its end
    "UPDATE floor_items SET state = %(state)s, finished = clock_timestamp(), "
    "exit_code = %(code)s WHERE name = %(name)s AND owner = %(me)s AND state = 'running'"
)


def shared(url: str, state: str, cmd: list[str], keeper: Keeper | None, files: list[str],
           parallelism: int) -> list[int]:  # fmt: skip
    """The fleet's floor (`--ledger`): this process's threads drain the shared table."""
    import psycopg

    logs = os.path.join(state, "logs") + os.sep
    os.makedirs(logs, exist_ok=True)
    me = f"{socket.gethostname()}-{os.getpid()}"
    by_name = {os.path.basename(path): path for path in files}
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(7)")  # one process makes the table
        conn.execute(LEDGER_TABLE)
        conn.execute("SELECT pg_advisory_unlock(7)")
        conn.execute("INSERT INTO floor_items (name) SELECT unnest(%s::text[]) "
                     "ON CONFLICT DO NOTHING", (sorted(by_name),))  # fmt: skip
    program = shutil.which(cmd[0]) or cmd[0]
    base = dict(os.environ)
    codes: list[int] = []

    def drain() -> None:
        item_file = os.path.join(state, f"item-{threading.get_ident()}.json")
        with psycopg.connect(url, autocommit=True) as conn:
            while found := conn.execute(TAKE, {"me": me, "logs": logs}).fetchall():
                name = found[0][0]
                fd = os.open(item_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC,
                             0o600)  # fmt: skip
                os.write(fd, json.dumps({"name": name, "path": by_name.get(name)}).encode())
                os.close(fd)
                log_path = logs + name + ".log"
                if keeper is not None:
                    code = keeper.run(name, log_path, item_file)
                else:
                    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC,
                                  0o644)  # fmt: skip
                    os.write(log, f"=== {name} at {time.time()} ===\n".encode())
                    pid = os.posix_spawn(
                        program, cmd, {**base, "WORK_ITEM_FILE": item_file}, setsid=True,
                        file_actions=[(os.POSIX_SPAWN_DUP2, log, 1), (os.POSIX_SPAWN_DUP2, log, 2)],
                    )  # fmt: skip
                    os.close(log)
                    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
                conn.execute(END, {"state": "succeeded" if code == 0 else "failed",
                                   "code": code, "name": name, "me": me})  # fmt: skip
                if keeper is not None:
                    keeper.acked(name)
                codes.append(code)

    threads = [threading.Thread(target=drain) for _ in range(parallelism)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return codes


class Keeper:
    """The manager's side: a forked keeper process (`keep`) and a reader of its ends."""

    def __init__(self, state: str, cmd: list[str], shim: bool = False) -> None:
        os.makedirs(state, exist_ok=True)
        ours, theirs = socket.socketpair()
        self.pid = os.fork()
        if self.pid == 0:  # before any thread: the keeper is this process, forked
            ours.close()
            keep(theirs, os.path.join(state, "journal"), shutil.which(cmd[0]) or cmd[0], cmd,
                 os.path.join(state, "ends") if shim else None)  # fmt: skip
            os._exit(0)
        theirs.close()
        self.sock, self.lock, self.acks = ours, threading.Lock(), []
        self.ends: dict[str, tuple[threading.Event, list]] = {}
        threading.Thread(target=self._read, daemon=True).start()

    def run(self, name: str, log: str, item_file: str) -> int:
        done, box = self.ends[name] = (threading.Event(), [])
        with self.lock:
            request = {"name": name, "log": log, "file": item_file, "ack": self.acks,
                       "slot": threading.get_ident()}  # fmt: skip
            self.acks = []
            self.sock.sendall(json.dumps(request).encode() + b"\n")
        done.wait()
        return box[0]

    def close(self) -> None:
        """The keeper ends once every worker has (no more starts) and is waited for, so its
        CPU counts in this process tree's."""
        self.sock.shutdown(socket.SHUT_WR)
        os.waitpid(self.pid, 0)

    def acked(self, name: str) -> None:
        with self.lock:
            self.acks.append(name)

    def _read(self) -> None:
        for line in self.sock.makefile("rb"):
            end = json.loads(line)
            done, box = self.ends.pop(end["name"])
            box.append(end["code"])
            done.set()


def keep(sock: socket.socket, journal_path: str, program: str, cmd: list[str],
         ends: str | None = None) -> None:  # fmt: skip
    """The keeper: start each worker asked for (itself, or through its slot's shim when `ends`
    names the shims' folder), journal its start and end, report the end."""
    journal = os.open(journal_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    poller = select.epoll()
    poller.register(sock.fileno(), select.EPOLLIN)
    poller.register(wake_r, select.EPOLLIN)
    pending, running, base = b"", {}, dict(os.environ)
    shims: dict[int, socket.socket] = {}  # slot -> its shim's socket
    by_fd: dict[int, socket.socket] = {}  # a shim's socket by its descriptor
    running_on: dict[int, str] = {}  # a shim's descriptor -> the item its worker runs
    if ends is not None:
        os.makedirs(ends, exist_ok=True)

    def ended(name: str, code: int) -> None:
        end = {"name": name, "code": code}
        os.write(journal, json.dumps({"end": end, "at": time.time()}).encode() + b"\n")
        sock.sendall(json.dumps(end).encode() + b"\n")

    while True:
        for fd, _ in poller.poll():
            if fd in by_fd:
                ended(running_on.pop(fd), int(by_fd[fd].recv(64)))
                continue
            if fd == wake_r:
                os.read(wake_r, 4096)
                while running:
                    pid, status = os.waitpid(-1, os.WNOHANG)
                    if pid == 0:
                        break
                    ended(running.pop(pid), os.waitstatus_to_exitcode(status))
                continue
            data = sock.recv(65536)
            if not data:  # the shims end too, waited for: their CPU counts in the tree's
                for shim_sock in by_fd.values():
                    shim_sock.close()
                for _ in by_fd:
                    os.wait()
                return
            *lines, pending = (pending + data).split(b"\n")
            for line in lines:
                ask = json.loads(line)
                log = os.open(ask["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC,
                              0o644)  # fmt: skip
                os.write(log, f"=== {ask['name']} at {time.time()} ===\n".encode())
                env = {**base, "WORK_ITEM_FILE": ask["file"]}
                if ends is None:
                    pid = os.posix_spawn(
                        program, cmd, env, setsid=True,
                        file_actions=[(os.POSIX_SPAWN_DUP2, log, 1),
                                      (os.POSIX_SPAWN_DUP2, log, 2)],
                    )  # fmt: skip
                    os.close(log)
                    running[pid] = ask["name"]
                    start = {"start": {"name": ask["name"], "pid": pid}, "ack": ask["ack"]}
                    os.write(journal, json.dumps(start).encode() + b"\n")
                    continue
                if ask["slot"] not in shims:
                    shim_sock = shims[ask["slot"]] = _fork_shim(
                        os.path.join(ends, str(len(shims))), program, cmd
                    )
                    by_fd[shim_sock.fileno()] = shim_sock
                    poller.register(shim_sock.fileno(), select.EPOLLIN)
                shim_sock = shims[ask["slot"]]
                start = {"start": {"name": ask["name"], "slot": ask["slot"]}, "ack": ask["ack"]}
                os.write(journal, json.dumps(start).encode() + b"\n")  # then the go-ahead
                running_on[shim_sock.fileno()] = ask["name"]
                socket.send_fds(shim_sock, [json.dumps(env).encode()], [log])
                os.close(log)


def _fork_shim(ends_file: str, program: str, cmd: list[str]) -> socket.socket:
    """A slot's shim, forked once: each message is a worker's environment with its log's
    descriptor; it spawns the worker, waits, writes the end to its file, sends it back."""
    ours, theirs = socket.socketpair()
    if os.fork() != 0:
        theirs.close()
        return ours
    ours.close()
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.setsid()
    out = os.open(ends_file, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
    while True:
        data, fds, _, _ = socket.recv_fds(theirs, 1 << 20, 1)
        if not data:
            os._exit(0)
        pid = os.posix_spawn(
            program, cmd, json.loads(data),
            file_actions=[(os.POSIX_SPAWN_DUP2, fds[0], 1), (os.POSIX_SPAWN_DUP2, fds[0], 2)],
        )  # fmt: skip
        os.close(fds[0])
        code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        os.pwrite(out, f"{pid} {code}".encode().ljust(63) + b"\n", 0)
        theirs.send(str(code).encode())


if __name__ == "__main__":
    main()
