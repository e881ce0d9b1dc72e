"""Placement on a shared ledger (issue 62), printed: each item only where it may run, what the
match costs a claim, a preferred manager's share, spill-over and drain times.

    misplaced   three local managers (`workqueue run --ledger`, offers a, b, and a+b) over
                3,000 items of three needs (a, b, a+b), a real PostgreSQL: by each worker's
                own mark, how many items ran where their need was not offered (goal 0), and
                every item once
    claim       one claim's round trip (start and finish beside it) over 2,000 waiting items,
                without needs, and with their needs spread over 10 and over 1,000 distinct
                ones that the manager meets (goal <= 1.2x of without) - and meeting half, with
                a second manager (on the same ledger) taking the other half, and with nobody
                taking it (those items leave the line once the manager's heartbeat settles
                which items no live manager can run: the bench settles once before timing)
    backlog     10,000 items no live manager may run ahead of 400 of this manager's own: a
                claim before the settling took them out of the line, and after
    prefer      a preferred manager and another (--prefers) over 100 items the preferred one
                needs 10 s for: each one's share with a spill-over of 30 s and of 2 s; and with
                no preferred manager running, how long the first item waits (its spill-over,
                2 s, plus the other's start and look)
    drain       two managers with a backlog, one drained (`workqueue drain`): how long until
                it holds nothing

Run: .venv/bin/python -m bench.placement [--only SECTION ...] [--items 3000] [--quick]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import psycopg

from bench import parsed, postgres_server, shared_postgres
from tests.support.servers import wait_until

WORKER = """#!/bin/sh
name=$(sed -n 's/.*"name": *"\\([^"]*\\)".*/\\1/p' "$WORK_ITEM_FILE")
echo "{tag} $name" >> {marks}
sleep {service}
"""


def workqueue(*args, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "kube_workqueue.manager.cli", *map(str, args)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            **kw)  # fmt: skip


def manager(work: Path, url: str, tag: str, *flags, service: float = 0.0) -> subprocess.Popen:
    """A `workqueue run` over `work/items` on the ledger `url`, its worker marking `tag`."""
    state = work / f"state-{tag}"
    worker = work / f"worker-{tag}.sh"
    worker.write_text(WORKER.format(tag=tag, marks=work / "marks", service=service))
    worker.chmod(0o755)
    return workqueue("run", work / "items", "--suffix", ".txt", "--settle", "0", "--ledger", url,
                     "--state-dir", state, *flags, "--", worker)  # fmt: skip


def marks(work: Path) -> list[tuple[str, str]]:
    path = work / "marks"
    if not path.exists():
        return []
    return [tuple(line.split(" ", 1)) for line in path.read_text().splitlines() if " " in line]


def fill(work: Path, names: list[str]) -> None:
    folder = work / "items"
    folder.mkdir(exist_ok=True)
    for name in names:
        (folder / name).write_text(name)
        os.utime(folder / name, (1_000_000_000, 1_000_000_000))


def misplaced(items: int) -> None:
    server, work = postgres_server(), Path(tempfile.mkdtemp(prefix="placement-"))
    try:
        url = server.database()
        third = items // 3
        names = [f"{need}-{i:05}.txt" for need in ("a", "b", "ab") for i in range(third)]
        fill(work, names)
        needs = ["--needs", "a-*=a", "--needs", "b-*=b", "--needs", "ab-*=a,b"]
        offers = {"A": ["--offers", "a=yes"], "B": ["--offers", "b=yes"],
                  "AB": ["--offers", "a=yes", "--offers", "b=yes"]}  # fmt: skip
        began = time.perf_counter()
        runs = [manager(work, url, tag, *needs, *flags, "--parallelism", "4")
                for tag, flags in offers.items()]  # fmt: skip
        for run in runs:
            _, err = run.communicate(timeout=1800)
            assert run.returncode == 0, err[-2000:]
        took = time.perf_counter() - began
        ran = marks(work)
        need_of = {"a": {"a"}, "b": {"b"}, "ab": {"a", "b"}}
        offered = {"A": {"a"}, "B": {"b"}, "AB": {"a", "b"}}
        wrong = [(tag, name) for tag, name in ran
                 if not need_of[name.split("-")[0]] <= offered[tag]]  # fmt: skip
        once = Counter(name for _, name in ran)
        shares = Counter(tag for tag, _ in ran)
        print(f"misplaced: {len(names):,} items of three needs on three managers (offers a, b, "
              f"a+b) in {took:.1f} s: {len(wrong)} misplaced (goal 0), "
              f"{sum(1 for n in names if once[n] == 1):,} ran once, "
              f"{sum(1 for n in names if once[n] > 1)} more than once; shares "
              + ", ".join(f"{t} {shares[t]:,}" for t in offers))  # fmt: skip
    finally:
        server.close()
        shutil.rmtree(work, ignore_errors=True)


def claim_cost(waiting: int = 2000, rounds: int = 3) -> None:
    from kube_workqueue.manager.fleet.database import Database
    from kube_workqueue.manager.fleet.ledger import PostgresLedger
    from kube_workqueue.manager.placement import Placement, need_rule, offer

    def timed(distinct: int, met_share: float, rival: bool = False) -> float:
        """p50 of this manager's claims; with `rival`, a second manager that meets the needs
        this one does not claims (untimed) after each of its claims - a fleet in which the
        others take their items; without, nobody does and they gather at the line's head."""
        server = postgres_server()
        try:
            url = server.database()  # (each call is a new database: one for both managers)
            db = Database(url)
            rules = [need_rule(f"n{i:04}-*=k{i}") for i in range(distinct)]
            met = [offer(f"k{i}=y") for i in range(distinct) if i < distinct * met_share]
            ledger = PostgresLedger(db, "bench")
            ledger.place(Placement(met, rules))
            ledger.join()
            other = None
            if rival:
                rest = [offer(f"k{i}=y") for i in range(distinct) if i >= distinct * met_share]
                other = PostgresLedger(Database(url), "rival")
                other.place(Placement(rest, rules))
                other.join()
            names = [f"n{i % distinct:04}-{i:05}" if distinct else f"x-{i:05}"
                     for i in range(waiting)]  # fmt: skip
            ledger.see(names)
            with db.session() as session:
                session.cursor.execute("ANALYZE items")
            ledger.settle_unmet()  # (its heartbeat's: what no live manager meets leaves the line)
            runs = int(waiting * (met_share if distinct else 0.5 if rival else 1.0))
            took = claim_p50(ledger, runs, other)
            ledger.close()
            if other is not None:
                other.close()
            return took
        finally:
            server.close()

    cases = [(10, 1.0, False), (1000, 1.0, False), (10, 0.5, True), (1000, 0.5, True),
             (10, 0.5, False), (1000, 0.5, False)]  # fmt: skip
    bases: list[float] = []
    pairs: list[float] = []
    ratios: dict[tuple, list[float]] = {case: [] for case in cases}
    costs: dict[tuple, list[float]] = {case: [] for case in cases}
    for _ in range(rounds):  # interleaved: each round's ratios against that round's bases
        base, pair = timed(0, 1.0), timed(0, 1.0, rival=True)
        bases.append(base)
        pairs.append(pair)
        for case in cases:
            cost = timed(*case)
            costs[case].append(cost)
            ratios[case].append(cost / (pair if case[2] else base))
    print(f"claim: p50 over {waiting:,} waiting, no needs: {spread(bases, 1000)} ms "
          f"(min / median / max of {rounds} rounds)")  # fmt: skip
    print(f"claim: the same, a second manager claiming beside it: {spread(pairs, 1000)} ms")
    for case in cases:
        distinct, share, rival = case
        who = ("; a second manager takes the rest (against the pair without needs)" if rival
               else "; nobody takes the rest" if share < 1 else "")  # fmt: skip
        cost, ratio = spread(costs[case], 1000), spread(ratios[case])
        print(f"claim: {distinct:,} distinct needs, {share:.0%} of them met{who}: "
              f"{cost} ms ({ratio}x; goal <= 1.2x)")  # fmt: skip


def claim_p50(ledger, claims: int, other=None) -> float:
    """The p50 of `claims` claims of one item by `ledger`, each started and finished; with
    `other`, a second manager's claim of one (untimed, started and finished) after each."""
    took = []
    for _ in range(claims):
        began = time.perf_counter()
        (name,) = ledger.claim(1)
        took.append(time.perf_counter() - began)
        ledger.start(name, "log")
        ledger.finish(name, True, 0, None)
        for taken in other.claim(1) if other is not None else ():
            other.start(taken, "log")
            other.finish(taken, True, 0, None)
    return sorted(took)[claims // 2]


def backlog(stuck: int = 10000, own: int = 400) -> None:
    """A backlog only an absent manager may run (`stuck` items of a need no live manager
    meets) at the head of the line, this manager's `own` items behind it: a claim's p50
    before its heartbeat settled which items no live manager can run, and after."""
    from kube_workqueue.manager.fleet.database import Database
    from kube_workqueue.manager.fleet.ledger import PostgresLedger
    from kube_workqueue.manager.placement import Placement, need_rule, offer

    server = postgres_server()
    try:
        db = Database(server.database())
        ledger = PostgresLedger(db, "bench")
        ledger.place(Placement([offer("cpu=y")], [need_rule("gpu-*=gpu")]))
        ledger.join()
        for first in range(0, stuck, 5000):
            ledger.see([f"gpu-{i:06}" for i in range(first, min(stuck, first + 5000))])
        ledger.see([f"cpu-{i:06}" for i in range(own)])
        with db.session() as session:
            session.cursor.execute("ANALYZE items")
        before = claim_p50(ledger, own // 2)
        ledger.settle_unmet()
        after = claim_p50(ledger, own // 2)
        ledger.close()
    finally:
        server.close()
    print(f"backlog: {stuck:,} items no live manager may run ahead of {own} of its own: a "
          f"claim's p50 {before * 1000:.2f} ms before its heartbeat took them out of the line, "
          f"{after * 1000:.2f} ms after")  # fmt: skip


def spread(values: list[float], scale: float = 1.0) -> str:
    """min / median / max, of `values` times `scale`."""
    ordered = sorted(v * scale for v in values)
    return " / ".join(f"{v:.2f}" for v in (ordered[0], ordered[len(ordered) // 2], ordered[-1]))


def prefer(items: int = 100, spills: tuple[str, ...] = ("30s", "2s")) -> None:
    """`items` (100) at once; a preferred manager (2 slots, 0.2 s an item: 10 s for 100) beside
    a spot one, with a spill-over of 30 s (longer than the preferred one needs) and of 2 s;
    then the spot one alone (the preferred one stopped): how long the first item waits."""
    for spill in spills:
        server, work = postgres_server(), Path(tempfile.mkdtemp(prefix="prefer-"))
        try:
            url = server.database()
            fill(work, [f"p-{i:03}.txt" for i in range(items)])
            flags = ["--prefers", "spot!=true", "--spill-after", spill, "--parallelism", "2"]
            runs = [manager(work, url, tag, *flags, "--offers", f"spot={spot}", service=0.2)
                    for tag, spot in (("steady", "false"), ("spot", "true"))]  # fmt: skip
            for run in runs:
                _, err = run.communicate(timeout=600)
                assert run.returncode == 0, err[-2000:]
            shares = Counter(tag for tag, _ in marks(work))
            print(f"prefer: {items} items, spill-over {spill}: the preferred manager ran "
                  f"{shares['steady']}, the spot one {shares['spot']}")  # fmt: skip
        finally:
            server.close()
            shutil.rmtree(work, ignore_errors=True)
    server, work = postgres_server(), Path(tempfile.mkdtemp(prefix="spill-"))
    try:
        url = server.database()
        fill(work, [f"s-{i}.txt" for i in range(5)])
        began = time.time()
        alone = manager(work, url, "spot", "--prefers", "spot!=true", "--spill-after", "2s",
                        "--offers", "spot=true")  # fmt: skip
        wait_until(lambda: marks(work), timeout=120)
        first = time.time() - began
        alone.communicate(timeout=120)
        print(
            f"spill: no preferred manager running, the first item started on the spot one "
            f"{first:.2f} s after it started (spill-over 2 s; a manager's start included)"
        )
    finally:
        server.close()
        shutil.rmtree(work, ignore_errors=True)


def drain(items: int = 200) -> None:
    server, work = postgres_server(), Path(tempfile.mkdtemp(prefix="drain-"))
    try:
        url = server.database()
        fill(work, [f"d-{i:04}.txt" for i in range(items)])
        runs = [manager(work, url, tag, "--parallelism", "4", service=0.5) for tag in "AB"]
        try:
            wait_until(lambda: len(marks(work)) >= 8, timeout=120)
            a_id = (work / "state-A" / "manager-id").read_text().strip()
            began = time.perf_counter()
            command = [sys.executable, "-m", "kube_workqueue.manager.cli", "drain", a_id,
                       "--ledger", url]  # fmt: skip
            done = subprocess.run(command, capture_output=True, text=True)
            assert done.returncode == 0, done.stderr
            said = time.perf_counter()

            def holding() -> int:
                with psycopg.connect(url) as conn:
                    return conn.execute("SELECT count(*) FROM workqueue.items WHERE owner = %s",
                                        (a_id,)).fetchone()[0]  # fmt: skip

            wait_until(lambda: holding() == 0, timeout=120, interval=0.05)
            print(f"drain: the drained manager held nothing {time.perf_counter() - said:.2f} s "
                  f"after the command returned ({said - began:.2f} s to run it; its items run "
                  f"0.5 s)")  # fmt: skip
        finally:
            for run in runs:
                run.send_signal(signal.SIGTERM)
                run.wait(60)
    finally:
        server.close()
        shutil.rmtree(work, ignore_errors=True)


SECTIONS = ("misplaced", "claim", "backlog", "prefer", "drain")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the claim section")
    parser.add_argument("--only", nargs="*", choices=SECTIONS, default=list(SECTIONS))
    args = parsed(parser, {"items": 30, "rounds": 1})
    with shared_postgres(args.quick):
        sections(args)


def sections(args: argparse.Namespace) -> None:
    """The sections `--only` names, in turn; in quick form each at a size of a few dozen."""
    quick = args.quick
    if "misplaced" in args.only:
        misplaced(args.items)
    if "claim" in args.only:
        claim_cost(*((60,) if quick else ()), rounds=args.rounds)
    if "backlog" in args.only:
        backlog(*((200, 20) if quick else ()))
    if "prefer" in args.only:
        prefer(*((10, ("2s",)) if quick else ()))  # (one spill-over: its code is the same)
    if "drain" in args.only:
        drain(*((20,) if quick else ()))


if __name__ == "__main__":
    main()
