"""Benchmark of `workqueue status` on a Kubernetes queue of many finished items.

The API-server stand-in holds --items finished items (1,000,000 by default) in recorded batches
of 1,000, as a manager in batch mode leaves them; `workqueue status --backend kubernetes` (the
summary, and --json) is timed as a whole command, Python's start and the client's import
included (goal <= 5 s at a million), beside its floor: a process that only imports the client
and lists the batches' ConfigMaps (what any status must read). With --peer (another checkout,
e.g. a worktree of the commit before) the same command of that tree runs on the same stand-in.

Run: .venv/bin/python -m bench.status [--items 1000000] [--peer /tmp/oldtree] [--quick]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

from bench import parsed  # noqa: E402
from kube_workqueue.manager.backends.kubernetes.manifests import batch_objects as bo  # noqa: E402
from kube_workqueue.manager.backends.kubernetes.manifests import objects as ko  # noqa: E402
from kube_workqueue.manager.backends.kubernetes.records.batch_data import Batch, render  # noqa: E402
from tests.support.apiserver import ApiServer  # noqa: E402
from tests.support.peer_code import peer_code  # noqa: E402

NS, QUEUE, BATCH = "media", "bench", 1_000


def recorded_batches(server: ApiServer, items: int) -> None:
    for seq, first in enumerate(range(0, items, BATCH), start=1):
        names = [f"{i:07d}.x" for i in range(first, min(items, first + BATCH))]
        data = render(Batch(seq, [ko.item_hash(QUEUE, n) for n in names], ["v1"] * len(names),
                            [1] * len(names), ["succeeded"] * len(names)))  # fmt: skip
        labels = {**bo.batch_labels(QUEUE, seq), bo.ROLE_LABEL: "batch"}
        server.store.create("", "configmaps", NS,
                            {"metadata": {"name": bo.batch_name(QUEUE, seq), "labels": labels},
                             "data": data})  # fmt: skip


def timed_status(tree: Path, kubeconfig: str, *extra: str) -> tuple[float, str]:
    peer = peer_code(tree)  # this checkout's command, or the peer tree's
    command = [*peer.command, "status", "--backend", "kubernetes",
               "--namespace", NS, "--queue", QUEUE, "--kubeconfig", kubeconfig, *extra]  # fmt: skip
    began = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=peer.cwd, env=peer.env,
                          timeout=900)  # fmt: skip
    seconds = time.perf_counter() - began
    if done.returncode != 0:
        raise SystemExit(f"status failed in {tree}: {done.stderr.strip()[-500:]}")
    return seconds, done.stdout.splitlines()[0]


FLOOR = """
import sys
from kube_workqueue.manager.backends.kubernetes.client.api import KubeApi, load_configuration
api = KubeApi(sys.argv[1], load_configuration(sys.argv[2]), qps=0)
items, _ = api.list("configmaps", sys.argv[3])
print(len(items))
"""


def timed_floor(kubeconfig: str) -> float:
    selector = f"{bo.batch_selector(QUEUE)},{bo.ROLE_LABEL}=batch"
    began = time.perf_counter()
    subprocess.run([sys.executable, "-c", FLOOR, NS, kubeconfig, selector], check=True,
                   capture_output=True, cwd=REPO, timeout=900)  # fmt: skip
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--peer", help="another checkout whose `status` to time beside")
    args = parsed(parser, {"items": 2_000})
    server = ApiServer(history=1_000).start()
    try:
        recorded_batches(server, args.items)
        kubeconfig = server.write_kubeconfig(Path(tempfile.mkdtemp()) / "kubeconfig")
        print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
        line = ""
        for extra in ((), ("--json",)):
            ours, first = timed_status(REPO, kubeconfig, *extra)
            line = line if extra else first
            shown = f"status {' '.join(extra) or '(summary)'} at {args.items:,} items: "
            shown += f"{ours:.2f} s (goal <= 5 s)"
            if args.peer:
                theirs, _ = timed_status(Path(args.peer), kubeconfig, *extra)
                shown += f"; peer {theirs:.2f} s, peer/ours {theirs / ours:.1f}x"
            print(shown)
        print(f"  it says: {line}")
        print(f"floor (start, import, list the batches): {timed_floor(kubeconfig):.2f} s")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
