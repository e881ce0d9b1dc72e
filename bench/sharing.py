"""Many managers on one queue (issue: a shared ledger), printed: seed 001's experiment.

Two, then four, local managers (`workqueue manager --ledger postgresql://…`, each with a state
directory of its own, as on separate machines) work one folder through one ambassador and one
real PostgreSQL (`initdb`/`pg_ctl` in a temporary folder). Items arrive as a steady stream with
a burst in the middle; each worker sleeps `--service` seconds and notes its start and end.
Printed per configuration: each manager's share of the items, the claims it made, refused
(the line said items waited, a rival took them) and lost (its lease ran out first), the claim
round trip's p99 (the managers' own `workqueue_claim_seconds`), items run more than once, and
whether every item ended. Goals: contention (refused + lost) <= 1% of claims, shares within
15% of even, every item exactly once.

Then the claim at scale: one claim's round trip (start and finish included) with 1,000 and
with 1,000,000 finished items in the ledger beside 1,000 waiting - the line's partial index
keeps it flat.

Then the kill: two managers, one killed with -9 in the middle of the stream. Printed: how many
items it held, how long after the kill the last of them ended on the other manager, against
the lease - and again, items run more than once.

The peer is buildkite/agent-stack-k8s#953's measurement (26% of reservations refused); it is
a figure from the issue, not re-run here.

Then the fleet's figures: writes at rest with 10,000 claimed items and the claim ceiling with
batched claims (`bench/fleet_ledger.py`), and end-to-end drains beside PgQueuer and
procrastinate (`bench/fleet.py`).

Run: .venv/bin/python -m bench.sharing [--seconds 60] [--rate 8] [--burst 150]
     [--service 0.5] [--parallelism 4] [--lease 5] [--only SECTION ...] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import psycopg
import requests

from bench import parsed, postgres_server, shared_postgres
from tests.support.servers import Server, free_port, wait_until

WORKER = """#!/bin/sh
name=$(sed -n 's/.*"name": *"\\([^"]*\\)".*/\\1/p' "$WORK_ITEM_FILE")
echo "start $name" >> {marks}
sleep {service}
echo "end $name" >> {marks}
"""


class Manager:
    def __init__(self, work: Path, index: int, source: str, url: str, args) -> None:
        self.state = work / f"manager-{index}"
        self.port = free_port()
        command = [
            sys.executable, "-m", "kube_workqueue.manager.cli",
                "manager", "--source", source, "--watch",
            "--backend", "local", "--ledger", url, "--state-dir", str(self.state),
            "--worker-cmd", str(work / "worker.sh"), "--parallelism", str(args.parallelism),
            "--lease", f"{args.lease}s", "--metrics-port", str(self.port),
            "--log-level", "warning",
        ]  # fmt: skip
        with open(work / f"manager-{index}.log", "w") as log:
            self.process = subprocess.Popen(command, stderr=log)

    def metrics(self) -> dict[str, float]:
        found: dict[str, float] = {}
        try:
            text = requests.get(f"http://127.0.0.1:{self.port}/metrics", timeout=5).text
        except requests.RequestException:
            return found
        for line in text.splitlines():
            if line.startswith("workqueue_claim"):
                name, value = line.rsplit(" ", 1)
                found[name] = float(value)
        return found

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()


def rows(url: str) -> list[tuple]:
    with psycopg.connect(url) as conn:
        if conn.execute("SELECT to_regclass('workqueue.items')").fetchone()[0] is None:
            return []
        return conn.execute("SELECT name, state, log_path, owner FROM workqueue.items").fetchall()


def feed(folder: Path, args, stop: threading.Event) -> int:
    """The stream and its burst; how many items were written."""
    count = 0
    started = time.monotonic()
    burst_at = args.seconds / 2
    burst_done = False
    while time.monotonic() - started < args.seconds and not stop.is_set():
        (folder / f"item-{count:06}.txt").write_text("x")
        count += 1
        if not burst_done and time.monotonic() - started >= burst_at:
            for _ in range(args.burst):
                (folder / f"item-{count:06}.txt").write_text("x")
                count += 1
            burst_done = True
        time.sleep(1 / args.rate)
    return count


def marks(work: Path) -> tuple[Counter, Counter]:
    path = work / "marks"
    lines = path.read_text().split("\n") if path.exists() else []
    starts = Counter(line[6:] for line in lines if line.startswith("start "))
    ends = Counter(line[4:] for line in lines if line.startswith("end "))
    return starts, ends


def session(args, managers: int, *, kill: bool = False) -> None:
    work = Path(tempfile.mkdtemp(prefix="wq-sharing-"))
    server = postgres_server()
    ambassador = None
    running: list[Manager] = []
    try:
        url = server.database()
        folder = work / "items"
        folder.mkdir()
        worker = work / "worker.sh"
        worker.write_text(WORKER.format(marks=work / "marks", service=args.service))
        worker.chmod(0o755)
        ambassador = Server(folder, free_port(), ("--suffix", ".txt"))
        ambassador.wait_ready()
        running = [Manager(work, i, ambassador.url, url, args) for i in range(managers)]
        for manager in running:
            wait_until(lambda m=manager: m.metrics(), timeout=60)
        stop = threading.Event()
        killed_at, held = None, []
        if kill:

            def killer() -> None:
                nonlocal killed_at, held
                time.sleep(args.seconds / 3)
                victim = running[0]
                prefix = str(victim.state)

                def victims() -> list[str]:
                    return [r[0] for r in rows(url) if r[1] == "running" and
                            (r[2] or "").startswith(prefix)]  # fmt: skip

                wait_until(victims, timeout=60, interval=0.01, most=0.01)  # while it runs something
                held = victims()
                victim.process.send_signal(signal.SIGKILL)
                killed_at = time.monotonic()

            threading.Thread(target=killer, daemon=True).start()
        total = feed(folder, args, stop)
        wait_until(lambda: sum(1 for r in rows(url) if r[1] == "succeeded") >= total,
                   timeout=args.seconds * 4 + 120, interval=0.5, most=1)  # fmt: skip
        finished = rows(url)
        starts, ends = marks(work)
        twice = sorted(n for n, c in ends.items() if c > 1)
        label = f"{managers} managers" + (" (one killed with -9)" if kill else "")
        print(f"\n{label}: {total} items over {args.seconds:g}s ({args.rate:g}/s and a burst "
              f"of {args.burst}), service {args.service:g}s, parallelism {args.parallelism} "
              "each")  # fmt: skip
        claims = refused = lost = 0.0
        for index, manager in enumerate(running):
            share = sum(1 for r in finished if r[1] == "succeeded" and
                        (r[2] or "").startswith(str(manager.state)))  # fmt: skip
            found = manager.metrics() if manager.process.poll() is None else {}
            made = sum(v for k, v in found.items() if k.startswith("workqueue_claims_total"))
            no = sum(v for k, v in found.items() if k.startswith("workqueue_claims_refused_total"))
            gone = sum(v for k, v in found.items() if k.startswith("workqueue_claims_lost_total"))
            p99 = next((v for k, v in found.items() if 'quantile="0.99"' in k), None)
            claims, refused, lost = claims + made, refused + no, lost + gone
            even = total / managers
            said = f"claims {made:.0f}, refused {no:.0f}, lost {gone:.0f}, " + (
                f"claim p99 {p99 * 1000:.1f} ms" if p99 is not None else "killed: no metrics"
            )
            print(f"  manager {index}: {share} items ({(share - even) / even * 100:+.0f}% of "
                  f"even); {said}")  # fmt: skip
        contention = (refused + lost) / claims * 100 if claims else 0.0
        ended = sum(1 for n in ends if ends[n] >= 1)
        print(f"  contention {contention:.2f}% of {claims:.0f} claims (goal <= 1%; "
              f"agent-stack-k8s#953: 26%); items ended {ended} of {total}; "
              f"ended more than once: {len(twice)} {twice[:5]}; "
              f"started more than once: {sum(1 for c in starts.values() if c > 1)}")  # fmt: skip
        if kill:
            last = 0.0
            for name in held:
                wait_until(lambda n=name: ends[n] >= 1 or marks(work)[1][n] >= 1, timeout=120)
            done_at = {}
            for row in finished:
                if row[0] in held:
                    done_at[row[0]] = row
            with psycopg.connect(url) as conn:
                got = conn.execute(
                    "SELECT max(finished) FROM workqueue.items WHERE name = ANY(%s)", (held,)
                ).fetchone()[0]
            kill_wall = time.time() - (time.monotonic() - killed_at)
            last = (got - kill_wall) if got else float("nan")
            print(f"  the killed manager held {len(held)} running item(s); the last of them "
                  f"ended elsewhere {last:.1f}s after the kill (lease {args.lease:g}s + a "
                  f"service time of {args.service:g}s)")  # fmt: skip
        print("  " + json.dumps({"total": total, "twice": len(twice), "contention_pct":
                                 round(contention, 3)}))  # fmt: skip
    finally:
        for manager in running:
            manager.stop()
        if ambassador is not None:
            ambassador.stop()
        server.close()
        shutil.rmtree(work, ignore_errors=True)


def claims_at(finished: int, waiting: int = 1000) -> None:
    """Claim, start and finish `waiting` items one by one beside `finished` finished rows."""
    from kube_workqueue.manager.fleet.database import Database
    from kube_workqueue.manager.fleet.ledger import PostgresLedger

    server = postgres_server()
    try:
        db = Database(server.database())
        ledger = PostgresLedger(db, "bench")
        ledger.join()
        with db.session() as session:
            session.cursor.execute(
                "INSERT INTO items (name, first_seen, state, attempts, claimable) SELECT "
                "'done-' || i, 0, 'succeeded', 1, false FROM generate_series(1, %s) i",
                (finished,),
            )
            session.cursor.execute("ANALYZE items")
        ledger.see([f"wait-{i:05}" for i in range(waiting)])
        claim, whole = [], []
        for _ in range(waiting):
            began = time.perf_counter()
            (name,) = ledger.claim(1)
            claimed = time.perf_counter()
            ledger.start(name, "log")
            ledger.finish(name, True, 0, None)
            claim.append(claimed - began)
            whole.append(time.perf_counter() - began)
        claim.sort(), whole.sort()

        def at(values: list[float], q: float) -> float:
            return values[min(len(values) - 1, int(q * len(values)))] * 1000

        print(f"\nclaims beside {finished:,} finished items ({waiting:,} waiting): claim p50 "
              f"{at(claim, 0.5):.2f} ms, p99 {at(claim, 0.99):.2f} ms; claim + start + finish "
              f"p50 {at(whole, 0.5):.2f} ms, p99 {at(whole, 0.99):.2f} ms")  # fmt: skip
        ledger.close()
    finally:
        server.close()


SECTIONS = ("sessions", "scale", "kill", "at-rest", "ceiling", "drains")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--rate", type=float, default=8, help="items a second, steady")
    parser.add_argument("--burst", type=int, default=150)
    parser.add_argument("--service", type=float, default=0.5)
    parser.add_argument("--parallelism", type=int, default=4)
    parser.add_argument("--lease", type=float, default=5)
    parser.add_argument("--managers", type=int, nargs="*", default=[2, 4])
    parser.add_argument("--finished", type=int, nargs="*", default=[1_000, 1_000_000])
    parser.add_argument("--only", nargs="*", choices=SECTIONS, default=list(SECTIONS),
                        help="the sections to run (default: all)")  # fmt: skip
    args = parsed(parser, {"seconds": 3.0, "burst": 10, "service": 0.1, "managers": [2],
                           "finished": [1_000]})  # fmt: skip
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    with shared_postgres(args.quick):
        sections(args)


def sections(args: argparse.Namespace) -> None:
    """The sections `--only` names, in turn (in quick form: seconds, and one server for all;
    the drains are `bench.fleet`'s own quick form)."""
    from . import fleet, fleet_ledger

    quick = args.quick
    if "sessions" in args.only:
        for managers in args.managers:
            session(args, managers)
    if "scale" in args.only:
        for finished in args.finished:
            claims_at(finished)
    if "kill" in args.only:
        session(args, 2, kill=True)
    if "at-rest" in args.only:
        fleet_ledger.at_rest(**({"claimed": 200, "seconds": 1.0, "flush": 0.5} if quick else {}))
    if "ceiling" in args.only:
        fleet_ledger.ceiling(*((100, 1) if quick else ()))
    if "drains" in args.only:
        if quick:  # the same drains as `python -m bench.fleet --quick`, which runs them
            print("\ndrains: left to `python -m bench.fleet --quick` in the quick form")
        else:
            fleet.drains()


if __name__ == "__main__":
    main()
