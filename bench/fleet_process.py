"""Where a fleet manager's CPU goes, beside the fleet's floor: the dispatching process alone.

`bench/fleet.py` gives the CPU a drain took for whole process trees (managers, keepers,
shims, workers) and PostgreSQL. This splits the tree, in a steady state: one `workqueue run
--ledger` and one `bench.local_floor --durable --kept --shim --ledger` (the least a fleet's
manager does and still keeps the promise) drain the same folder in turn on one PostgreSQL,
and PgQueuer's worker process the same number of jobs that each start `true` (`bench/peers/`,
no keeper or shims: the peer keeps no such promise). Over a window in the middle of each
drain (from a fifth of the items on, `--window` seconds) it reads from `/proc`

    the dispatching process   its own CPU (every thread's), and its context switches (every
                              thread's, voluntary and not: a thread that waits for a lock,
                              an answer or the GIL, and one preempted)
    its keeper and shims      the Python processes under it (the workers, `true`, are not
                              counted: they are the same program either way)

each divided by the items that ended in the window (the ledger's count). Both processes run
their threads the same way - a thread per slot, the keeper's ends read by a thread of their
own - so the context switches say how much of a difference is threads handing work and the
GIL to each other, and the CPU how much is work done per item. PgQueuer's line is what ours
must come under to drain ahead of it on two cores: its process's CPU a job, against ours
with its keeper and shims.

    python -m bench.fleet_process [--items 6000] [--rounds 3] [--window 3] [--quick]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg

from bench import parsed, spread
from bench.fleet import (
    drain_folder,
    floor_command,
    manager_command,
    peer_drain_command,
    peer_enqueue,
    peers_python,
)
from tests.support.postgres import PostgresServer

TICKS = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> tuple[int, str, float]:
    """(ppid, command name, CPU seconds of its own) of a live process."""
    with open(f"/proc/{pid}/stat") as f:
        text = f.read()
    name = text[text.index("(") + 1 : text.rindex(")")]
    fields = text[text.rindex(")") + 2 :].split()
    return int(fields[1]), name, (int(fields[11]) + int(fields[12])) / TICKS


def _switches(pid: int) -> int:
    """Context switches of every live thread of `pid`, voluntary and not."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/status") as f:
                for line in f:
                    if line.startswith(("voluntary_ctxt", "nonvoluntary_ctxt")):
                        total += int(line.split()[1])
        except OSError:  # the thread ended meanwhile
            continue
    return total


def _helpers(root: int) -> dict[int, float]:
    """The Python processes under `root` (its keeper and shims): pid -> CPU seconds."""
    table = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                table[int(entry)] = _stat(int(entry))
            except OSError:
                continue
    found, frontier = {}, [root]
    while frontier:
        parent = frontier.pop()
        for pid, (ppid, name, cpu) in table.items():
            if ppid == parent:
                frontier.append(pid)
                if name.startswith("python"):
                    found[pid] = cpu
    return found


def _count(url: str, query: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        try:
            return conn.execute(query).fetchone()[0]
        except psycopg.errors.UndefinedTable:  # not made yet
            return 0


def _succeeded(table: str):
    """Items ended so far, for a drain that keeps a row an item (ours, the floor)."""
    return lambda url, items: _count(url, f"SELECT count(*) FROM {table} WHERE state = 'succeeded'")


def _dequeued(url: str, items: int) -> int:
    """Jobs PgQueuer has ended: its queue's rows go as they end (a few at a time: it acks in
    small batches, so the count trails by a batch at most)."""
    return items - _count(url, "SELECT count(*) FROM pgqueuer")


def _sample(pid: int) -> tuple[float, int, dict[int, float]]:
    return _stat(pid)[2], _switches(pid), _helpers(pid)


def measure(command: list[str], url: str, ended, items: int, window: float) -> dict:
    """One drain: the dispatching process's CPU and context switches an item over the window,
    its keeper's and shims' CPU an item, and the drain's items a second (launch to exit).
    `ended(url, items)`: how many have ended so far."""
    began = time.monotonic()
    run = subprocess.Popen(command, cwd=Path(__file__).resolve().parent.parent,
                           env={**os.environ, "WORKQUEUE_LEDGER": url},
                           stdout=subprocess.DEVNULL)  # fmt: skip
    try:
        while ended(url, items) < items // 5:
            assert run.poll() is None, f"{command[1:3]} ended early ({run.returncode})"
            time.sleep(0.05)
        first, cpu0, switches0, helpers0 = ended(url, items), *_sample(run.pid)
        time.sleep(window)
        cpu1, switches1, helpers1 = _sample(run.pid)
        done = max(1, ended(url, items) - first)  # (a quick form's drain may end in its window)
        assert run.wait(timeout=600) == 0, f"{command[1:3]} failed"
    finally:
        if run.poll() is None:
            run.kill()
    assert ended(url, items) == items
    helpers = sum(cpu - helpers0.get(pid, 0.0) for pid, cpu in helpers1.items())
    return {
        "process": (cpu1 - cpu0) / done * 1000,
        "switches": (switches1 - switches0) / done,
        "helpers": helpers / done * 1000,
        "rate": items / (time.monotonic() - began),
    }


def _ours(python: str, url: str, folder: Path, state: str, items: int):
    return manager_command(folder, state, 4), _succeeded("workqueue.items")


def _floor(python: str, url: str, folder: Path, state: str, items: int):
    return floor_command(folder, state, 4, url), _succeeded("floor_items")


def _pgqueuer(python: str, url: str, folder: Path, state: str, items: int):
    """PgQueuer's worker process, each job a `true` it starts (`bench/peers/`), its queue
    filled first."""
    peer_enqueue(python, "pgqueuer_drain.py", url, items)
    return peer_drain_command(python, "pgqueuer_drain.py", url, items, 4), _dequeued


CONTENDERS = {
    "workqueue run --ledger": _ours,
    "the fleet's floor": _floor,
    "PgQueuer (spawning)": _pgqueuer,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=6000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--window", type=float, default=3.0)
    args = parsed(parser, {"items": 200, "rounds": 1, "window": 0.3})
    work = Path(tempfile.mkdtemp(prefix="wq-fleet-process-"))
    folder = drain_folder(work, args.items)
    server = PostgresServer()
    # the quick form leaves the peer out: its environment is installed from the network
    contenders = [who for who in CONTENDERS if not (args.quick and who.startswith("PgQueuer"))]
    found: dict[str, list[dict]] = {name: [] for name in contenders}
    python = peers_python() if len(contenders) == len(CONTENDERS) else ""
    try:
        if not python:
            print("the peer left out: PgQueuer runs without --quick")
        print(f"\none drain of {args.items:,} `true` items at parallelism 4 each, in turn, "
              f"{args.rounds} rounds, a {args.window:g} s window from a fifth of the items on; "
              f"load {os.getloadavg()[0]:.2f} at the start:")  # fmt: skip
        for round_ in range(args.rounds):
            for who, rows in found.items():
                url = server.database()
                state = str(work / f"state-{round_}-{len(rows)}-{who[:3]}")
                command, ended = CONTENDERS[who](python, url, folder, state, args.items)
                rows.append(measure(command, url, ended, args.items, args.window))
        for who, rows in found.items():
            print(f"  {who}: {spread([r['rate'] for r in rows])} items/s; the dispatching "
                  f"process {spread([r['process'] for r in rows], '.2f')} ms of CPU and "
                  f"{spread([r['switches'] for r in rows], '.1f')} context switches an item; "
                  f"its keeper and shims {spread([r['helpers'] for r in rows], '.2f')} ms "
                  "(min / median / max)")  # fmt: skip
    finally:
        server.close()
        subprocess.run(["rm", "-rf", str(work)], check=False)


if __name__ == "__main__":
    main()
