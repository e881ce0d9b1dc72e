"""A fleet's drains against its peers, printed (the last section of `bench/sharing.py`; the
ledger's own figures at rest and at its ceiling are `bench/fleet_ledger.py`'s).

    drains       `workqueue run --ledger` over 5,000 `true` items with 1, 2 and 4 managers at
                 parallelism 4 each (a process per item): items a second from launch to the
                 last exit, and how long after its last item each manager exits (goal <= 1 s);
                 beside, on the same server in the same run: the fleet's floor (as many
                 `bench.local_floor --ledger` processes: an item taken and started in one
                 statement, ended in another, its worker started through a keeper's journal
                 and a slot's shim - the least that keeps the promise), PgQueuer's and
                 procrastinate's drain of 5,000 jobs that each start `true` (their own
                 environment, `.venv-peers`, made on first use), and the floor of a process
                 per item on one machine: a bare thread pool spawning `true`. Beside each
                 rate, the CPU it took an item: the launched processes' trees (managers,
                 keepers, shims, workers - or a peer's processes and the programs they
                 started) and PostgreSQL's. On two cores a fleet of four is bound by it.
                 Ours is timed from its managers' launch, its schema made, the folder listed
                 and the names recorded; each peer both from its workers' launch (its queue
                 filled before) and from its enqueue's launch (schema and jobs put in), the
                 same drain measured both ways, so neither side is timed from a later start

"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg

from bench import postgres_server, spread
from tests.support.postgres import PostgresServer

ROOT = Path(__file__).resolve().parent.parent
PEERS = ROOT / ".venv-peers"
PEER_SCRIPTS = ROOT / "bench" / "peers"
PEER_PACKAGES = ["pgqueuer==1.6.0", "procrastinate==3.10.0", "asyncpg", "psycopg[binary]"]


def peers_python() -> str:
    """The peers' interpreter (`.venv-peers`, made and filled on first use)."""
    python = PEERS / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(PEERS)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", *PEER_PACKAGES],
                       check=True)  # fmt: skip
    return str(python)


Spent = tuple[float, float]  # (clients, server) ms of CPU an item: `Cpu.per_item`
# a peer's drain timed from its enqueue's launch, beside the same drain from its workers'
FROM_ENQUEUE = " from its enqueue"


class Cpu:
    """CPU seconds spent from `Cpu(server)` to `per_item(n)`, in two parts: this process's
    children and everything they waited for (`RUSAGE_CHILDREN`: a drain's processes, their
    keepers, shims and workers - each reaped by its parent - or a peer's processes and the
    programs they started), and PostgreSQL's processes (their own CPU, a backend that ended
    counted through the postmaster that reaped it; one not yet reaped still shows its own)."""

    def __init__(self, server: PostgresServer) -> None:
        self.server = server
        self.clients, self.database = _children_cpu(), _server_cpu(server)

    def per_item(self, items: int) -> Spent:
        """(clients, server) milliseconds of CPU an item since this was made."""
        clients, database = _children_cpu() - self.clients, _server_cpu(self.server) - self.database
        return clients / items * 1000, database / items * 1000


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _server_cpu(server: PostgresServer) -> float:
    with open(os.path.join(server.data, "postmaster.pid")) as f:
        postmaster = int(f.readline())
    ticks = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:  # ended meanwhile: reaped, counted in the postmaster's below
            continue
        fields = stat[stat.rindex(")") + 2 :].split()  # state, ppid, ...: utime is the 12th
        if int(entry) == postmaster:
            ticks += sum(int(value) for value in fields[11:15])  # its own and its reaped
        elif int(fields[1]) == postmaster:
            ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def _together(commands: list[list[str]], **popen) -> tuple[list[str], list[float]]:
    """`commands` launched together and each waited for (exit 0, or the bench stops with its
    stderr): their outputs and the wall-clock time each was seen to end."""
    runs = [subprocess.Popen(command, stderr=subprocess.PIPE, text=True, **popen)
            for command in commands]  # fmt: skip
    outputs, exits = [], []
    for run in runs:
        out, err = run.communicate(timeout=600)
        exits.append(time.time())
        assert run.returncode == 0, err
        outputs.append(out)
    return outputs, exits


def drain_folder(work: Path, items: int) -> Path:
    """`work`/items: `items` empty `.txt` files, the folder every drain here runs over."""
    folder = work / "items"
    folder.mkdir()
    for i in range(items):
        (folder / f"item-{i:05}.txt").touch()
    return folder


def manager_command(folder: Path, state: Path | str, parallelism: int) -> list[str]:
    """One manager of a drain (`WORKQUEUE_LEDGER` in its environment names the ledger)."""
    return [sys.executable, "-m", "kube_workqueue.manager.cli", "run", str(folder), "--suffix",
            ".txt", "--settle", "0", "--parallelism", str(parallelism), "--state-dir",
            str(state), "--log-level", "warning", "--", "true"]  # fmt: skip


def floor_command(folder: Path, state: Path | str, parallelism: int, url: str) -> list[str]:
    """One process of the fleet's floor (run from the repository's root)."""
    return [sys.executable, "-m", "bench.local_floor", str(folder), "true", "--suffix", ".txt",
            "--parallelism", str(parallelism), "--durable", str(state), "--kept", "--shim",
            "--ledger", url]  # fmt: skip


def peer_enqueue(python: str, script: str, url: str, jobs: int) -> None:
    """A peer's queue (`script` in `bench/peers/`) filled with `jobs` jobs."""
    subprocess.run([python, str(PEER_SCRIPTS / script), url, str(jobs), "--phase", "enqueue"],
                   capture_output=True, check=True, cwd=tempfile.gettempdir())  # fmt: skip


def peer_drain_command(python: str, script: str, url: str, jobs: int, concurrency: int):
    """One worker process of that peer draining them, each job a `true` it starts."""
    return [python, str(PEER_SCRIPTS / script), url, str(jobs), "--phase", "drain", "--spawn",
            "--concurrency", str(concurrency)]  # fmt: skip


def _fleet_drain(server: PostgresServer, folder: Path, work: Path, managers: int,
                 parallelism: int) -> tuple[float, list[float], Spent]:  # fmt: skip
    """`managers` runs of `workqueue run --ledger` over `folder`: items/s from launch to the
    last exit, each run's exit after the ledger's last finish, and the CPU an item took
    (`Cpu.per_item`)."""
    url = server.database()
    env = {**os.environ, "WORKQUEUE_LEDGER": url}
    cpu = Cpu(server)
    began = time.monotonic()
    _, exits = _together([
        manager_command(folder, work / f"state-{managers}-{i}", parallelism)
        for i in range(managers)
    ], env=env, stdout=subprocess.DEVNULL)  # fmt: skip
    took = time.monotonic() - began
    items = len(list(folder.iterdir()))
    spent = cpu.per_item(items)
    with psycopg.connect(url) as conn:
        last, count = conn.execute(
            "SELECT max(finished), count(*) FILTER (WHERE state = 'succeeded') FROM workqueue.items"
        ).fetchone()
    assert count == items, count
    return count / took, [at - last for at in exits], spent


def _peer_fleet(python: str, script: str, server: PostgresServer, jobs: int, workers: int,
                concurrency: int) -> tuple[float, Spent, float, Spent]:  # fmt: skip
    """A peer's fleet: `jobs` jobs enqueued, then `workers` worker processes launched together,
    each at `concurrency`, each job a process it starts (`--spawn`).

    Two measures of one drain: jobs a second from the workers' launch to the last exit, start-up
    included, and the CPU a job took from that launch (`Cpu.per_item`) - the enqueue before it
    not counted; then the same from the enqueue's launch, its schema installed and its jobs
    inserted - the work ours does in its run (its schema, the folder's listing and the names
    recorded), so the two sides are timed alike from the items' arrival."""
    url = server.database()
    cpu_arrived = Cpu(server)
    arrived = time.monotonic()
    peer_enqueue(python, script, url, jobs)
    cpu = Cpu(server)
    began = time.monotonic()
    outputs, _ = _together([
        peer_drain_command(python, script, url, jobs, concurrency) for _ in range(workers)
    ], stdout=subprocess.PIPE, cwd=tempfile.gettempdir())  # fmt: skip
    ran = sum(json.loads(out.strip().splitlines()[-1])["jobs"] for out in outputs)
    ended = time.monotonic()
    spent, spent_arrived = cpu.per_item(jobs), cpu_arrived.per_item(jobs)
    assert ran == jobs, (ran, jobs)  # every job once: a drain that ran one twice is no figure
    return jobs / (ended - began), spent, jobs / (ended - arrived), spent_arrived


def _floor_fleet(server: PostgresServer, folder: Path, work: Path, processes: int,
                 parallelism: int) -> tuple[float, Spent]:  # fmt: skip
    """The fleet's floor (`bench.local_floor --durable --kept --shim --ledger`): `processes`
    processes draining one table, each item claimed-and-started in one statement and ended in
    another, its worker started through a keeper's journal and a slot's shim: items a second
    from launch to the last exit, measured as ours is, and the CPU an item took."""
    url = server.database()
    cpu = Cpu(server)
    began = time.monotonic()
    _together([
        floor_command(folder, work / f"floor-{processes}-{i}", parallelism, url)
        for i in range(processes)
    ], cwd=ROOT)  # fmt: skip
    took = time.monotonic() - began
    items = len(list(folder.iterdir()))
    spent = cpu.per_item(items)
    with psycopg.connect(url) as conn:
        count, most = conn.execute(
            "SELECT count(*) FILTER (WHERE state = 'succeeded'), max(attempts) FROM floor_items"
        ).fetchone()
    assert count == items and most == 1, (count, most)
    return count / took, spent


def drains(items: int = 5000, parallelism: int = 4, fleets=(1, 2, 4), rounds: int = 3,
           with_peers: bool = True) -> None:  # fmt: skip
    """The fleet against itself and its peers, in rounds (each round: ours with 1, 2 and 4
    managers, then each peer with 1, 2 and 4 worker processes - interleaved, so a busy spell
    of the machine falls on all of them): items a second, min / median / max over the rounds,
    and each peer's per-round ratio to ours at the same count. Without `with_peers` (the quick
    form: their environment is installed from the network) the peers are left out, and said
    to be."""
    work = Path(tempfile.mkdtemp(prefix="wq-drains-"))
    folder = drain_folder(work, items)
    server = postgres_server()
    peers = (("pgqueuer_drain.py", "PgQueuer"), ("procrastinate_drain.py", "procrastinate"))
    peers = peers if with_peers else ()
    ours: dict[int, list[float]] = {n: [] for n in fleets}
    floors: dict[int, list[float]] = {n: [] for n in fleets}
    theirs: dict[tuple[str, int], list[float]] = {(p, n): [] for _, p in peers for n in fleets}
    arrived: dict[tuple[str, int], list[float]] = {(p, n): [] for _, p in peers for n in fleets}
    lags: list[float] = []
    spent: dict[tuple[str, int], list[Spent]] = {}  # (who, processes): CPU
    try:
        python = peers_python() if peers else ""
        if not peers:
            print("peers left out: PgQueuer and procrastinate run without --quick")
        print(f"\ndrains of {items:,} items, parallelism {parallelism} a manager or worker "
              f"process, each item a process (`true`), {rounds} rounds on one server, "
              f"load {os.getloadavg()[0]:.2f} at the start:")  # fmt: skip
        for _ in range(rounds):
            for managers in fleets:
                rate, exits, cpu = _fleet_drain(server, folder, work, managers, parallelism)
                ours[managers].append(rate)
                spent.setdefault(("ours", managers), []).append(cpu)
                lags += exits
                rate, cpu = _floor_fleet(server, folder, work, managers, parallelism)
                floors[managers].append(rate)
                spent.setdefault(("the floor", managers), []).append(cpu)
            for script, name in peers:
                for workers in fleets:
                    rate, cpu, whole, cpu_whole = _peer_fleet(
                        python, script, server, items, workers, parallelism
                    )
                    theirs[(name, workers)].append(rate)
                    spent.setdefault((name, workers), []).append(cpu)
                    arrived[(name, workers)].append(whole)
                    spent.setdefault((name + FROM_ENQUEUE, workers), []).append(cpu_whole)
        for managers in fleets:
            print(f"  workqueue run --ledger, {managers} manager(s): "
                  f"{spread(ours[managers])} items/s")  # fmt: skip
        for processes in fleets:
            ratios = [o / f for o, f in zip(ours[processes], floors[processes], strict=True)]
            print(f"  the fleet's floor (bench.local_floor --durable --kept --shim --ledger), "
                  f"{processes} process(es): {spread(floors[processes])} items/s; ours / the "
                  f"floor per round {spread(ratios, '.2f')}")  # fmt: skip
        for _, name in peers:
            for workers in fleets:
                rates = theirs[(name, workers)]
                ratios = [o / t for o, t in zip(ours[workers], rates, strict=True)]
                print(f"  {name}, {workers} worker process(es) spawning `true` per job: "
                      f"{spread(rates)} jobs/s; ours / theirs per round "
                      f"{spread(ratios, '.2f')}")  # fmt: skip
                wholes = arrived[(name, workers)]
                ratios = [o / t for o, t in zip(ours[workers], wholes, strict=True)]
                print(f"    the same from its enqueue's launch (schema and jobs in, as ours "
                      f"lists and records): {spread(wholes)} jobs/s; ours / theirs per round "
                      f"{spread(ratios, '.2f')}")  # fmt: skip
        print("  CPU an item, the processes' trees + PostgreSQL, ms (min / median / max of "
              "their sum over the rounds; the parts at its median):")  # fmt: skip
        for processes in fleets:
            print(f"    {processes} process(es): " + "; ".join(
                f"{who} {_cpu_spread(spent[(who, processes)])}"
                for who in ("ours", "the floor",
                            *(f"{name}{whence}" for _, name in peers
                              for whence in ("", FROM_ENQUEUE)))
            ))  # fmt: skip
        most, one = ours[fleets[-1]], ours[fleets[0]]
        print(f"  {fleets[-1]} managers / {fleets[0]}, per round: "
              + ", ".join(f"{f / o:.2f}" for f, o in zip(most, one, strict=True))
              + " (goal >= 1)")  # fmt: skip
        print(f"  a manager's exit after the ledger's last finish: max {max(lags):.2f} s "
              f"(goal <= 1 s)")  # fmt: skip
        for label, extra in (("a bare thread pool", []),
                             ("a keeper, a journal, SQLite: the durable least",
                              ["--durable", str(work / "floor"), "--kept"])):  # fmt: skip
            began = time.monotonic()
            subprocess.run(
                [sys.executable, "-m", "bench.local_floor", str(folder), "true", "--suffix",
                 ".txt", "--parallelism", str(parallelism), *extra], check=True, cwd=ROOT,
            )  # fmt: skip
            rate = items / (time.monotonic() - began)
            print(f"  the floor of a process per item ({label}, bench.local_floor): "
                  f"{rate:,.0f} items/s")  # fmt: skip
    finally:
        server.close()
        subprocess.run(["rm", "-rf", str(work)], check=False)


def _cpu_spread(rounds: list[Spent]) -> str:
    """A drain's CPU an item over its rounds: the sums' min / median / max, and the median
    round's two parts."""
    ordered = sorted(rounds, key=sum)
    middle = ordered[len(ordered) // 2]
    return (f"{sum(ordered[0]):.2f} / {sum(middle):.2f} / {sum(ordered[-1]):.2f} "
            f"({middle[0]:.2f} + {middle[1]:.2f})")  # fmt: skip


if __name__ == "__main__":
    import argparse

    from bench import parsed

    parser = argparse.ArgumentParser(description="the fleet's drains against its peers")
    parser.add_argument("--items", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parsed(parser, {"items": 40, "rounds": 1})
    drains(items=args.items, rounds=args.rounds, fleets=(1, 2) if args.quick else (1, 2, 4),
           with_peers=not args.quick)  # fmt: skip
