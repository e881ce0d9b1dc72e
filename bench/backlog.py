"""Benchmark of a million waiting: a manager in batch mode (`--batch-size 1000`) on the API-server
stand-in, its source an ambassador over --items files (1,000,000 by default).

  1. Every item new (pending): the manager's peak memory (VmHWM, goal <= 500 MB), its first Job
     after the first listing is in (goal <= 30 s), and the items it hands to the cluster per
     second over --window seconds from that first Job (goal >= 500; a kubelet completes each
     Job at once, and the machine's load is printed beside it).
  2. Every item known (finished, in recorded batches) and 1,000 new ones among them, a
     thousand names apart (the worst case for pages of data): the first Job after the first
     listing (goal <= 30 s), and the source requests that brought the new items' data.
  3. The floor under both: a client that only lists the names (what any first Job waits for).
  4. The embedded default (`--backend local`) with --local-items (100,000) waiting behind one
     blocked worker: the manager's memory per pending item (against 10,000 waiting), and
     `workqueue status` over its state folder (goal: well under the million's 5 s).

With --peer TREE the same runs use that tree's manager (tests/support/peer_code.py) - e.g. a
worktree of the commit before - in the same session; --peer-items sizes its runs (a manager
that keeps every pending item's data needs ~2 KB an item).

Run: .venv/bin/python -m bench.backlog [--items 1000000] [--window 60] [--peer /tmp/oldtree]
                                       [--quick]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

from bench import parsed  # noqa: E402
from bench.kubernetes import WORKQUEUE, ambassador, cpu_seconds, manager_args  # noqa: E402
from bench.status import recorded_batches  # noqa: E402
from kube_workqueue.manager.sources.http import SourceClient  # noqa: E402
from tests.support.apiserver import ApiServer  # noqa: E402
from tests.support.kubelet import Kubelet  # noqa: E402
from tests.support.peer_code import peer_code  # noqa: E402

BATCH = 1_000
NEW = 1_000


def name_of(i: int) -> str:
    return f"{i:07d}.x"  # as `bench.status.recorded_batches` records them


def touch(folder: Path, names) -> None:
    for name in names:
        (folder / name).touch()
        os.utime(folder / name, (1_000_000_000, 1_000_000_000))


def listing_seconds(url: str) -> float:
    client = SourceClient(url)
    client.keep_data_of(lambda name: True)  # as the manager lists: names only
    began = time.perf_counter()
    client.list_items()
    return time.perf_counter() - began


def memory(pid: int) -> tuple[int, int]:
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    return (int(fields["VmHWM"].split()[0]) * 1024, int(fields["VmRSS"].split()[0]) * 1024)


def run_manager(tree: Path, url: str, server: ApiServer, work: Path, window: float) -> dict:
    """A manager of `tree` until `window` seconds after its first Job (or its exit)."""
    kubeconfig = server.write_kubeconfig(work / f"kc-{time.monotonic_ns()}")
    peer = peer_code(tree)  # this checkout's command, or the peer tree's
    args = manager_args(url, kubeconfig, "--batch-size", str(BATCH), "--parallelism", "4000",
                        "--poll-interval", "3600")  # fmt: skip
    args = [*peer.command, *args[len(WORKQUEUE) :]]
    log = work / f"manager-{time.monotonic_ns()}.log"  # a file: a pipe left unread would fill
    began = time.monotonic()
    with open(log, "w") as err:
        proc = subprocess.Popen(args, cwd=peer.cwd, env=peer.env,
                                stdout=subprocess.DEVNULL, stderr=err)  # fmt: skip
    first = None
    peak = (0, 0)
    try:
        while proc.poll() is None:
            time.sleep(0.2)
            peak = max(peak, memory(proc.pid))
            if first is None:
                jobs = [t for v, r, c, t in list(server.answers) if (v, r) == ("create", "jobs")]
                first = min(jobs) if jobs else None
            if first is not None and time.monotonic() - first >= window:
                break
        cpu = cpu_seconds(proc.pid) if proc.poll() is None else 0.0
    finally:
        proc.terminate()
        proc.wait(120)
    if first is None:
        raise SystemExit(f"no Job from the manager of {tree}: {log.read_text()[-1500:]}")
    created = [t for v, r, c, t in server.answers if (v, r) == ("create", "jobs") and c < 300]
    handed = sum(1 for t in created if first <= t < first + window) * BATCH
    return {"first": first - began, "hwm": peak[0], "cpu": cpu, "rate": handed / window}


def pending(tree: Path, folder: Path, items: int, work: Path, window: float) -> dict:
    server = ApiServer(history=10_000).start()
    Kubelet(server, instant=True)
    amb = ambassador(folder)
    try:
        listed = listing_seconds(amb.url)
        out = run_manager(tree, amb.url, server, work, window)
        out["listing"] = listed
        return out
    finally:
        amb.stop()
        server.stop()


def known_and_new(tree: Path, folder: Path, items: int, work: Path, window: float) -> dict:
    server = ApiServer(history=10_000).start()
    recorded_batches(server, items)
    amb = ambassador(folder)
    try:
        listed = listing_seconds(amb.url)
        out = run_manager(tree, amb.url, server, work, window)
        out["listing"] = listed
        return out
    finally:
        amb.stop()
        server.stop()


def local_waiting(folder: Path, work: Path, count: int) -> tuple[int, float]:
    """(the local manager's resident bytes with `count` waiting, `workqueue status` seconds)."""
    from tests.support.servers import free_port, metric_sum

    worker = work / "blocks.sh"
    worker.write_text("#!/bin/sh\nexec sleep 6019\n")
    worker.chmod(0o755)
    amb = ambassador(folder)
    port, state = free_port(), work / f"local-state-{count}"
    command = [*WORKQUEUE, "manager",
               "--backend", "local", "--source", amb.url, "--worker-cmd", str(worker),
               "--state-dir", str(state), "--parallelism", "1", "--metrics-port", str(port),
               "--poll-interval", "3600"]  # fmt: skip

    proc = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        while metric_sum(port, "workqueue_adds_total") < count and proc.poll() is None:
            time.sleep(0.5)
        rss = memory(proc.pid)[1]
        began = time.perf_counter()
        subprocess.run([*WORKQUEUE, "status", "--state-dir", str(state)], cwd=REPO,
                       capture_output=True, check=True)  # fmt: skip
        return rss, time.perf_counter() - began
    finally:
        subprocess.run(["pkill", "-f", "sleep 6019"], check=False)
        proc.terminate()
        proc.wait(120)
        amb.stop()


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.1f}/{five:.1f} on {os.cpu_count()} CPUs"


def run_sections(args: argparse.Namespace, work: Path) -> None:
    """The sections `--only` names, their files and state folders made under `work`."""
    if "local" in args.only:
        sizes = (args.local_items // 10, args.local_items)
        measured = {}
        for count in sizes:
            folder = work / f"local-{count}"
            folder.mkdir()
            touch(folder, (name_of(i) for i in range(count)))
            measured[count] = local_waiting(folder, work, count)
        (small_rss, _), (rss, status) = measured[sizes[0]], measured[sizes[1]]
        print(f"local: {sizes[1]:,} waiting: manager {rss / 1e6:,.0f} MB, "
              f"{(rss - small_rss) / (sizes[1] - sizes[0]):,.0f} bytes a pending item (against "
              f"{sizes[0]:,}); `workqueue status` {status:.2f} s")  # fmt: skip
    if "kubernetes" not in args.only:
        return
    trees = [("this tree", REPO, args.items)]
    if args.peer:
        trees.append((f"peer {args.peer}", args.peer, args.peer_items))
    for label, tree, items in trees:
        folder = work / f"items-{items}"
        folder.mkdir(exist_ok=True)
        touch(folder, (name_of(i) for i in range(items)))
        p = pending(tree, folder, items, work, args.window)
        print(f"{label}: {items:,} pending: peak memory {p['hwm'] / 1e6:,.0f} MB (goal <= 500), "
              f"first Job {p['first']:.1f} s after start, {p['first'] - p['listing']:.1f} s "
              f"after a {p['listing']:.1f} s listing (goal <= 30 s); {p['rate']:,.0f} items/s "
              f"handed over {args.window:.0f} s (goal >= 500; {load()})")  # fmt: skip
        touch(folder, (f"{name_of(i)[:-2]}-new.x" for i in range(0, items, items // NEW)))
        k = known_and_new(tree, folder, items, work, min(5.0, args.window))
        print(f"{label}: {items:,} known + {NEW:,} new: first Job {k['first']:.1f} s after "
              f"start, {k['first'] - k['listing']:.1f} s after a {k['listing']:.1f} s listing "
              f"(goal <= 30 s); peak memory {k['hwm'] / 1e6:,.0f} MB")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--window", type=float, default=60.0)
    parser.add_argument("--peer", type=Path, help="another checkout, run the same way")
    parser.add_argument("--peer-items", type=int, default=100_000)
    parser.add_argument("--local-items", type=int, default=100_000)
    parser.add_argument("--only", default="kubernetes,local")
    args = parsed(parser, {"items": 2 * NEW, "window": 1.0, "local_items": 200})
    work = Path(tempfile.mkdtemp(prefix="wq-backlog-"))
    try:
        run_sections(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
