"""Tenants, measured: fair share against FIFO, limits across a fleet, a rate's busiest period, and
what the bookkeeping costs - every figure from the workers' own start/end marks.

    python -m bench.fairness [--a-items 2000] [--b-items 20] [--skip-fleet] [--rate-seconds 60]
                             [--quick]

  share        tenant A drops --a-items items, tenant B --b-items one second later; one local
               manager (`workqueue manager --watch` over an ambassador), P=4, 0.2 s of work an
               item. Without --fair, then with it, in the same run: B's median wait (from its
               files' arrival to each start) and A's total time (its first file to its last
               end). Goals: B's median wait with --fair <= 5% of FIFO's; A's total <= 1.05x
    limits       two managers on one shared ledger (a real PostgreSQL), P=4 each,
               `--limit '*=3'`, three groups of 40: the most items of one group ever running at
               once. Goal: never above 3
    rate         one manager, `--rate 'r=20/10s'`, starts over --rate-seconds (60): the most
               starts in any 10-second window. Goal: <= 20 (the rate is counted when the manager
               starts the work; a worker marks its start once its process runs, so the marks are
               also shown over 9.7 s windows: a start-up's jitter is not a broken rate)
    bookkeeping  the line alone (add + get + done, one thread) with 1,000 groups against no
               groups (a FIFO), interleaved rounds; and `workqueue run` over 2,000 `true`
               items in 1,000 groups against none. Goal: <= 1.1x
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from bench import parsed, postgres_server, scratch
from tests.support.marks import busiest_window, most_at_once, read_marks
from tests.support.servers import Server, free_port, wait_until

WORKER = """#!/bin/sh
name=$(sed -n 's/.*"name": *"\\([^"]*\\)".*/\\1/p' "$WORK_ITEM_FILE")
echo "start $(date +%s.%N) $name" >> {marks}
sleep {service}
echo "end $(date +%s.%N) $name" >> {marks}
"""


def worker(work: Path, service: float) -> tuple[Path, Path]:
    marks = work / "marks.txt"
    script = work / "worker.sh"
    script.write_text(WORKER.format(marks=marks, service=service))
    script.chmod(0o755)
    return script, marks


def group_of(name: str) -> str:
    return name.split("/")[0]


def drop(folder: Path, group: str, count: int) -> float:
    """`count` files of `group`, written into a hidden folder and moved in at once; when."""
    hidden = folder.parent / f".{group}"
    hidden.mkdir()
    for i in range(count):
        (hidden / f"{i:05d}.txt").write_text(group)
    os.rename(hidden, folder / group)
    return time.time()


def manager(work: Path, source: str, script: Path, *flags) -> subprocess.Popen:
    command = [
        sys.executable, "-m", "kube_workqueue.manager.cli",
            "manager", "--source", source, "--watch",
        "--backend", "local", "--state-dir", str(work / "state"), "--worker-cmd", str(script),
        "--group", "^([^/]+)/", "--log-level", "warning", *flags,
    ]  # fmt: skip
    return subprocess.Popen(command, stderr=open(work / "manager.log", "w"))  # noqa: SIM115


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()


def share(fair: bool, a_items: int, b_items: int) -> dict:
    work = scratch("wq-fair-")
    folder = work / "items"
    folder.mkdir()
    script, marks = worker(work, 0.2)
    ambassador = Server(folder, free_port(), ("--suffix", ".txt", "--recursive"))
    ambassador.wait_ready()
    flags = ["--parallelism", "4", *(["--fair"] if fair else [])]
    process = manager(work, ambassador.url, script, *flags)
    try:
        time.sleep(1.0)  # the manager is up and watching
        a_at = drop(folder, "a", a_items)
        time.sleep(1.0)
        b_at = drop(folder, "b", b_items)
        total = a_items + b_items
        ends = lambda: sum(e == "end" for e, _, _ in read_marks(marks))  # noqa: E731
        wait_until(lambda: ends() >= total, timeout=3600, interval=0.5)
    finally:
        stop(process)
        ambassador.stop()
    found = read_marks(marks)
    b_waits = [at - b_at for e, at, n in found if e == "start" and group_of(n) == "b"]
    a_ends = [at for e, at, n in found if e == "end" and group_of(n) == "a"]
    return {"b_median_wait": statistics.median(b_waits), "a_total": max(a_ends) - a_at}


def fleet_limits(each: int = 40) -> Counter:
    work = scratch("wq-limits-")
    folder = work / "items"
    folder.mkdir()
    script, marks = worker(work, 0.2)
    for group in ("x", "y", "z"):
        drop(folder, group, each)
    server = postgres_server()
    try:
        url = server.database()
        runs = [
            subprocess.Popen([
                sys.executable, "-m", "kube_workqueue.manager.cli",
                "run", str(folder), "--suffix", ".txt",
                "--recursive", "--settle", "0", "--ledger", url, "--state-dir",
                str(work / f"state-{i}"), "--parallelism", "4", "--group", "^([^/]+)/",
                "--limit", "*=3", "--log-level", "warning", "--", str(script),
            ], stdout=subprocess.DEVNULL)
            for i in range(2)
        ]  # fmt: skip
        for run in runs:
            run.wait(600)
    finally:
        server.close()  # (stop() alone left its folder in /tmp, a run at a time)
    return most_at_once(read_marks(marks), group_of)


def rate(seconds: float = 60.0) -> tuple[int, int, int]:
    work = scratch("wq-rate-")
    folder = work / "items"
    folder.mkdir()
    script, marks = worker(work, 0.05)
    drop(folder, "r", int(seconds / 10 * 20) + 40)
    ambassador = Server(folder, free_port(), ("--suffix", ".txt", "--recursive"))
    ambassador.wait_ready()
    process = manager(work, ambassador.url, script, "--parallelism", "4", "--rate", "r=20/10s")
    try:
        started = time.monotonic()
        wait_until(lambda: time.monotonic() - started >= seconds, timeout=seconds + 60)
    finally:
        stop(process)
        ambassador.stop()
    starts = [at for e, at, _ in read_marks(marks) if e == "start"]
    return len(starts), busiest_window(starts, 10.0), busiest_window(starts, 9.7)


def line_rounds(rounds: int = 20, items: int = 20_000) -> tuple[float, float]:
    """Seconds per add + get + done, FIFO against 1,000 groups (best of interleaved rounds)."""
    from kube_workqueue.manager.runtime.tenants import Tenants
    from kube_workqueue.manager.tenancy.rules import TenancyOptions
    from kube_workqueue.manager.workqueue import Queue

    names = [f"g{i % 1000:04d}/item-{i:07d}" for i in range(items)]

    def one(grouped: bool) -> float:
        order = None
        if grouped:
            tenants = Tenants(TenancyOptions(group="^([^/]+)/", limits=[("*", 50)]))
            order = tenants.order(lambda name: 0)
        queue = Queue(order=order)
        began = time.perf_counter()
        for name in names:
            queue.add(name)
        for _ in names:
            key, _ = queue.get()
            queue.done(key)
        return (time.perf_counter() - began) / items

    fifo, groups = [], []
    for _ in range(rounds):
        fifo.append(one(False))
        groups.append(one(True))
    return min(fifo), min(groups)


def run_rounds(rounds: int = 3, items: int = 2000) -> tuple[float, float]:
    """Seconds for `workqueue run` over `items` `true` items, none grouped against 1,000
    groups (median of interleaved rounds)."""
    work = scratch("wq-dispatch-")
    folder = work / "items"
    for i in range(items):
        group = folder / f"g{i % 1000:04d}"
        group.mkdir(parents=True, exist_ok=True)
        (group / f"{i:05d}.txt").write_text("x")

    def one(grouped: bool, index: int) -> float:
        flags = ["--group", "^([^/]+)/", "--limit", "*=4"] if grouped else []
        began = time.perf_counter()
        subprocess.run([
            sys.executable, "-m", "kube_workqueue.manager.cli",
            "run", str(folder), "--suffix", ".txt",
            "--recursive", "--settle", "0", "--state-dir", str(work / f"s-{grouped}-{index}"),
            "--parallelism", "8", *flags, "--", "true",
        ], check=True, stdout=subprocess.DEVNULL)  # fmt: skip
        return time.perf_counter() - began

    plain, grouped = [], []
    for index in range(rounds):
        plain.append(one(False, index))
        grouped.append(one(True, index))
    return statistics.median(plain), statistics.median(grouped)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a-items", type=int, default=2000)
    parser.add_argument("--b-items", type=int, default=20)
    parser.add_argument("--skip-fleet", action="store_true", help="no PostgreSQL part")
    parser.add_argument("--rate-seconds", type=float, default=60.0)
    sections(parsed(parser, {"a_items": 20, "b_items": 5, "rate_seconds": 5.0}))


def sections(args: argparse.Namespace) -> None:
    """Each section in turn, printed as it ends (in quick form: a few items each)."""
    quick = args.quick
    fifo = share(False, args.a_items, args.b_items)
    fair = share(True, args.a_items, args.b_items)
    print(f"share: A {args.a_items} items, B {args.b_items} one second later, P=4, 0.2 s work")
    print(f"  B's median wait   FIFO {fifo['b_median_wait']:7.2f} s   --fair "
          f"{fair['b_median_wait']:7.2f} s   ({fair['b_median_wait'] / fifo['b_median_wait']:.1%}"
          " of FIFO; goal <= 5%)")  # fmt: skip
    print(f"  A's total time    FIFO {fifo['a_total']:7.2f} s   --fair {fair['a_total']:7.2f} s"
          f"   ({fair['a_total'] / fifo['a_total']:.3f}x; goal <= 1.05x)")  # fmt: skip
    if not args.skip_fleet:
        most = fleet_limits(6 if quick else 40)
        print(f"limits: two managers on one shared ledger, P=4 each, --limit '*=3': most at "
              f"once per group {dict(sorted(most.items()))} (goal: never above 3)")  # fmt: skip
    count, busiest, inner = rate(args.rate_seconds)
    print(f"rate: --rate 'r=20/10s' over {args.rate_seconds:.0f} s: {count} starts; most in "
          f"any 10 s window {busiest} (goal <= 20); in any 9.7 s window {inner}")  # fmt: skip
    fifo_line, grouped_line = line_rounds(*((2, 2000) if quick else ()))
    print(f"bookkeeping: the line, add+get+done: FIFO {fifo_line * 1e6:.2f} us, 1,000 groups "
          f"{grouped_line * 1e6:.2f} us ({grouped_line / fifo_line:.2f}x)")  # fmt: skip
    rounds, items = (1, 100) if quick else (3, 2000)
    plain, grouped = run_rounds(rounds, items)
    print(f"bookkeeping: workqueue run, {items:,} `true` items: no groups {plain:.2f} s, "
          f"{min(items, 1000):,} groups with a limit each {grouped:.2f} s "
          f"({grouped / plain:.3f}x; goal <= 1.1x)")  # fmt: skip


if __name__ == "__main__":
    main()
