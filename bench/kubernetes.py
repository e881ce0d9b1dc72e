"""Benchmark of the Kubernetes backend against the API-server stand-in (tests/kube).

  1. N items (default 5,000) dispatched by `workqueue manager --backend kubernetes --once`, the
     client-side limiter off, a kubelet that completes each Job at once: API writes per second
     achieved (goal >= 100), the manager's CPU (goal: under one core), and the API writes per
     item, by kind (goal <= 4).
  2. The same with the limiter at 20 qps / burst 30, over a 30-second window: API calls and
     writes per second achieved (the limiter's goal: 20 +/- 1 calls per second).
  3. 10,000 finished, recorded Jobs and a source listing their 10,000 items: the cache's first
     list (goal <= 3 s), its memory against the raw JSON (goal <= 4x), and the API calls a
     running manager makes over 10 s with nothing new (goal: none besides the open watch).

Run: .venv/bin/python -m bench.kubernetes [--items 5000]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

from manager.backends.kubernetes import objects as ko  # noqa: E402
from manager.backends.kubernetes.api import KubeApi, load_configuration  # noqa: E402
from manager.backends.kubernetes.cache import ClusterCache  # noqa: E402
from tests.support.apiserver import ApiServer  # noqa: E402
from tests.support.kubelet import Kubelet  # noqa: E402
from tests.support.servers import Server, free_port  # noqa: E402

WORKQUEUE = [sys.executable, "-m", "manager.cli"]
NS, QUEUE = "media", "bench"
WRITES = {"create", "update", "patch", "delete"}


def folder_of(count: int, work: Path) -> Path:
    folder = work / f"items-{count}"
    folder.mkdir()
    for i in range(count):
        path = folder / f"{i:06d}.x"
        path.touch()
        os.utime(path, (1_000_000_000, 1_000_000_000))
    return folder


def ambassador(folder: Path) -> Server:
    """An ambassador in its own process (gunicorn, one worker) serving the `.x` files of
    `folder`, all at rest; ready once its first scan lists them all."""
    server = Server(folder, free_port(), ("--suffix", ".x", "--workers", "1"))
    server.wait_ready()
    return server


def manager_args(url: str, kubeconfig: str, *extra: str) -> list[str]:
    return [
        *WORKQUEUE,
        "manager",
        "--backend",
        "kubernetes",
        "--source",
        url,
        "--namespace",
        NS,
        "--queue",
        QUEUE,
        "--image",
        "bench:1",
        "--command",
        "true",
        "--kubeconfig",
        kubeconfig,
        "--parallelism",
        "64",
        *extra,
    ]


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def bench_dispatch(work: Path, count: int) -> None:
    server = ApiServer(history=200_000).start()
    Kubelet(server, instant=True)
    kubeconfig = server.write_kubeconfig(work / "kc1")
    folder = folder_of(count, work)
    amb = ambassador(folder)
    url = amb.url
    try:
        start = time.monotonic()
        proc = subprocess.Popen(
            manager_args(url, kubeconfig, "--once", "--kube-api-qps", "0"),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        cpu = 0.0
        while proc.poll() is None:
            cpu = cpu_seconds(proc.pid)
            time.sleep(0.2)
        wall = time.monotonic() - start
        writes = [t for verb, _, code, t in server.answers if verb in WRITES and code < 300]
        span = max(writes) - min(writes)
        jobs = sum(1 for (r, _, _) in server.store.objects if r == "jobs")
        print(
            f"{count:,} items -> {jobs:,} Jobs (+ ConfigMaps), limiter off: "
            f"{len(writes):,} API writes in {span:.1f} s = {len(writes) / span:,.0f} writes/s "
            f"(goal >= 100); manager CPU {cpu:.1f} s over {wall:.1f} s = "
            f"{cpu / wall:.2f} cores (goal < 1)"
        )
        kinds: dict[str, int] = {}
        for verb, resource, code, _ in server.answers:
            if verb in WRITES and code < 300:
                kinds[f"{resource} {verb}"] = kinds.get(f"{resource} {verb}", 0) + 1
        per_item = ", ".join(f"{k} {n / count:.2f}" for k, n in sorted(kinds.items()))
        print(f"writes per item: {len(writes) / count:.2f} (goal <= 4): {per_item}")
    finally:
        amb.stop()
        server.stop()


def bench_limited(work: Path, window: float = 30.0) -> None:
    server = ApiServer(history=200_000).start()
    Kubelet(server, instant=True)
    kubeconfig = server.write_kubeconfig(work / "kc2")
    folder = folder_of(2_000, Path(tempfile.mkdtemp(dir=work)))
    amb = ambassador(folder)
    url = amb.url
    try:
        proc = subprocess.Popen(
            manager_args(
                url, kubeconfig, "--once", "--kube-api-qps", "20", "--kube-api-burst", "30"
            ),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(5)  # start-up and the burst
        t0 = time.monotonic()
        time.sleep(window)
        t1 = time.monotonic()
        proc.terminate()
        proc.wait(30)
        calls = [(v, t) for v, _, _, t in server.answers if t0 <= t < t1 and v != "watch"]
        writes = [c for c in calls if c[0] in WRITES]
        print(
            f"limiter 20 qps / burst 30, over {window:.0f} s: {len(calls) / window:.1f} API "
            f"calls/s (goal 20 +/- 1), of which {len(writes) / window:.1f} writes/s"
        )
    finally:
        amb.stop()
        server.stop()


def bench_known_jobs(work: Path, count: int = 10_000) -> None:
    server = ApiServer(history=1_000).start()
    store = server.store
    names = [f"{i:06d}.x" for i in range(count)]
    record: dict[str, dict[str, str]] = {}
    for name in names:
        job = ko.job(QUEUE, NS, name, 1, ko.PodOptions(image="bench:1"))
        job["metadata"].pop("finalizers")
        job["status"] = {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]}
        store.create("batch", "jobs", NS, job)
        h = ko.item_hash(QUEUE, name)
        record.setdefault(h[0], {})[h] = "succeeded:1"
    for shard, data in record.items():
        store.create(
            "",
            "configmaps",
            NS,
            {
                "metadata": {
                    "name": f"{QUEUE}-record-{shard}",
                    "labels": {ko.QUEUE_LABEL: QUEUE, "workqueue.dev/role": "record"},
                },
                "data": data,
            },
        )
    kubeconfig = server.write_kubeconfig(work / "kc3")
    raw = len(json.dumps(store.list("jobs", NS, None)[0]))
    # The list is timed in a child process, so that the stand-in serving it (here) and the
    # client decoding it do not share one interpreter's lock, as they would not for real.
    child = subprocess.run(
        [sys.executable, "-m", "bench.kubernetes", "--time-list", kubeconfig],
        capture_output=True,
        text=True,
        check=True,
    )
    took, held = (float(x) for x in child.stdout.split())
    print(
        f"{count:,} known Jobs: the first list took {took:.2f} s (goal <= 3 s); the cache "
        f"holds {held / 1e6:.1f} MB for {raw / 1e6:.1f} MB of raw JSON = {held / raw:.2f}x "
        "(goal <= 4x)"
    )
    folder = folder_of(count, Path(tempfile.mkdtemp(dir=work)))
    amb = ambassador(folder)
    url = amb.url
    try:
        proc = subprocess.Popen(
            manager_args(url, kubeconfig, "--poll-interval", "2"),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(8)  # start-up: record, list, orphan check, the first polls
        t0 = time.monotonic()
        time.sleep(10)
        t1 = time.monotonic()
        proc.terminate()
        proc.wait(30)
        calls = [v for v, _, _, t in server.answers if t0 <= t < t1]
        print(
            f"with nothing new, over 10 s the manager made {len(calls)} API call(s) "
            f"{sorted(set(calls)) or ''} besides its open watch (goal 0)"
        )
    finally:
        amb.stop()
        server.stop()


def time_list(kubeconfig: str) -> None:
    """Child process: one cache list, timed; prints seconds and the bytes the cache keeps."""
    api = KubeApi(NS, load_configuration(kubeconfig), qps=0)
    cache = ClusterCache(api, ko.queue_selector(QUEUE))
    start = time.monotonic()
    cache._list()
    took = time.monotonic() - start
    print(took, deep_size(cache.items()))
    api.close()


def deep_size(obj) -> int:
    """Bytes of every object reachable from `obj`, each counted once."""
    seen: set[int] = set()
    stack, total = [obj], 0
    while stack:
        o = stack.pop()
        if id(o) in seen:
            continue
        seen.add(id(o))
        total += sys.getsizeof(o)
        if isinstance(o, dict):
            stack.extend(o.keys())
            stack.extend(o.values())
        elif isinstance(o, list | tuple | set):
            stack.extend(o)
    return total


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--time-list":
        time_list(sys.argv[2])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=5_000)
    parser.add_argument("--window", type=float, default=30.0)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="wq-bench-kube-"))
    try:
        bench_dispatch(work, args.items)
        bench_limited(work, args.window)
        bench_known_jobs(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
