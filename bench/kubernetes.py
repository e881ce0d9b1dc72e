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
  4. Batches (`--batch-size 1000`) at the default limiter, 20 qps / burst 30, beside one Job
     per item in the same run: for 100,000 items, API calls (reads and writes) per item (goal
     <= 0.05), items handed to the stand-in per second (goal >= 500), objects the manager
     creates per item (goal <= 0.02); one Job per item is measured on 200 items (its figures
     are per item; 100,000 would take it hours at 20 qps).
  5. 1,000,000 items known - listed by the source, finished, in 1,000 recorded batches: the
     manager's memory (VmHWM, goal <= 300 MB) and the record's bytes per item.

Run: .venv/bin/python -m bench.kubernetes [--items 5000] [--only batches,memory] [--quick]
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

from bench import parsed  # noqa: E402
from kube_workqueue.manager.backends.kubernetes.client.api import KubeApi, load_configuration  # noqa: E402
from kube_workqueue.manager.backends.kubernetes.client.cache import ClusterCache  # noqa: E402
from kube_workqueue.manager.backends.kubernetes.manifests import objects as ko  # noqa: E402
from tests.support.apiserver import ApiServer  # noqa: E402
from tests.support.kubelet import Kubelet  # noqa: E402
from tests.support.servers import Server, free_port  # noqa: E402

WORKQUEUE = [sys.executable, "-m", "kube_workqueue.manager.cli"]
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


def bench_limited(work: Path, window: float = 30.0, items: int = 2_000,
                  start_up: float = 5.0) -> None:  # fmt: skip
    server = ApiServer(history=200_000).start()
    Kubelet(server, instant=True)
    kubeconfig = server.write_kubeconfig(work / "kc2")
    folder = folder_of(items, Path(tempfile.mkdtemp(dir=work)))
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
        time.sleep(start_up)  # start-up and the burst
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


def bench_known_jobs(work: Path, count: int = 10_000, start_up: float = 8.0,
                     window: float = 10.0) -> None:  # fmt: skip
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
        time.sleep(start_up)  # start-up: record, list, orphan check, the first polls
        t0 = time.monotonic()
        time.sleep(window)
        t1 = time.monotonic()
        proc.terminate()
        proc.wait(30)
        calls = [v for v, _, _, t in server.answers if t0 <= t < t1]
        print(
            f"with nothing new, over {window:.0f} s the manager made {len(calls)} API call(s) "
            f"{sorted(set(calls)) or ''} besides its open watch (goal 0)"
        )
    finally:
        amb.stop()
        server.stop()


def bench_batches(work: Path, count: int = 100_000, per_item_count: int = 200) -> None:
    rows = []
    for label, n, extra in (
        ("one Job per item", per_item_count, ("--parallelism", "64")),
        ("batches of 1,000", count, ("--batch-size", "1000", "--parallelism", "4000")),
    ):
        server = ApiServer(history=50_000).start()
        Kubelet(server, instant=True)
        kubeconfig = server.write_kubeconfig(work / f"kc-{n}")
        folder = folder_of(n, Path(tempfile.mkdtemp(dir=work)))
        amb = ambassador(folder)
        try:
            start = time.monotonic()
            args = manager_args(amb.url, kubeconfig, "--once", "--kube-api-qps", "20",
                                "--kube-api-burst", "30", *extra)  # fmt: skip
            done = subprocess.run(args, capture_output=True, text=True)
            wall = time.monotonic() - start
            if done.returncode != 0:
                raise SystemExit(f"{label}: the manager failed: {done.stderr[-2000:]}")
            calls = [a for a in server.answers if a[0] != "watch"]
            created = [a for a in server.answers if a[0] == "create" and a[2] < 300]
            jobs = [a for a in created if a[1] == "jobs"]
            span = max(t for *_, t in jobs) - min(t for *_, t in jobs) if len(jobs) > 1 else 0
            rate = n / max(span, wall / max(1, len(jobs))) if jobs else 0.0
            rows.append((label, n, len(calls) / n, len(created) / n, rate, wall))
        finally:
            amb.stop()
            server.stop()
    print("mode               items    API calls/item  objects/item  items/s handed  wall")
    for label, n, calls, objects, rate, wall in rows:
        print(f"{label:<18} {n:>7,}  {calls:>13.3f}  {objects:>12.4f}  {rate:>14,.0f}  "
              f"{wall:5.1f} s")  # fmt: skip
    (_, _, c1, o1, r1, _), (_, _, cb, ob, rb, _) = rows
    print(f"batches: {cb:.3f} API calls/item (goal <= 0.05; {c1 / cb:,.0f}x fewer), "
          f"{rb:,.0f} items/s (goal >= 500; {rb / r1:,.0f}x), {ob:.4f} objects/item "
          "(goal <= 0.02)")  # fmt: skip


def bench_memory(work: Path, known: int = 1_000_000, batch: int = 1_000) -> None:
    """A manager over `known` finished items in recorded batches, its source listing them."""
    from kube_workqueue.manager.backends.kubernetes.manifests import batch_objects as bo
    from kube_workqueue.manager.backends.kubernetes.records.batch_data import Batch, render

    server = ApiServer(history=1_000).start()
    names = [f"{i:07d}.x" for i in range(known)]
    folder = work / "million"
    folder.mkdir()
    for name in names:
        (folder / name).touch()
        os.utime(folder / name, (1_000_000_000, 1_000_000_000))
    amb = ambassador(folder)
    try:
        listed = _versions_of(amb.url)
        stored = 0
        for seq, first in enumerate(range(0, known, batch), start=1):
            chunk = names[first : first + batch]
            data = render(Batch(seq, [ko.item_hash(QUEUE, n) for n in chunk],
                                [listed[n] for n in chunk], [1] * len(chunk),
                                ["succeeded"] * len(chunk)))  # fmt: skip
            stored += sum(len(k) + len(v.encode()) for k, v in data.items())
            cm = {"metadata": {"name": bo.batch_name(QUEUE, seq),
                               "labels": {**bo.batch_labels(QUEUE, seq), bo.ROLE_LABEL: "batch"}},
                  "data": data}  # fmt: skip
            server.store.create("", "configmaps", NS, cm)
        kubeconfig = server.write_kubeconfig(work / "kc-m")
        proc = subprocess.Popen(
            manager_args(amb.url, kubeconfig, "--batch-size", str(batch), "--poll-interval",
                         "3600"),
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        status = Path(f"/proc/{proc.pid}/status")
        idle, last, took = 0, -1.0, time.monotonic()
        while idle < 6 and proc.poll() is None:  # until its CPU has been still for 3 s
            time.sleep(0.5)
            cpu = cpu_seconds(proc.pid)
            idle = idle + 1 if cpu - last < 0.05 else 0
            last = cpu
        took = time.monotonic() - took - 3
        fields = dict(line.split(":", 1) for line in status.read_text().splitlines())
        hwm = int(fields["VmHWM"].split()[0]) * 1024
        rss = int(fields["VmRSS"].split()[0]) * 1024
        proc.terminate()
        proc.wait(60)
        print(f"{known:,} items known (listed, finished, in {known // batch:,} recorded "
              f"batches): manager peak memory {hwm / 1e6:,.0f} MB, settled {rss / 1e6:,.0f} MB "
              f"(goal <= 300 MB), up in {took:.0f} s; the record holds {stored / known:.0f} "
              "bytes/item")  # fmt: skip
    finally:
        amb.stop()
        server.stop()


def _versions_of(url: str) -> dict[str, str]:
    from kube_workqueue.manager.sources.http import SourceClient

    client = SourceClient(url)
    names = client.list_items()
    return {n: client.peek(n)["version"] for n in names}


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
    parser.add_argument("--batch-items", type=int, default=100_000)
    parser.add_argument("--known", type=int, default=1_000_000)
    parser.add_argument("--only", default="dispatch,limited,known,batches,memory")
    args = parsed(parser, {"items": 50, "window": 1.0, "batch_items": 2_000, "known": 2_000})
    only = set(args.only.split(","))
    work = Path(tempfile.mkdtemp(prefix="wq-bench-kube-"))
    try:
        if "dispatch" in only:
            bench_dispatch(work, args.items)
        if "limited" in only:
            bench_limited(work, args.window, *((200, 2.0) if args.quick else ()))
        if "known" in only:
            bench_known_jobs(work, *((200, 2.0, 2.0) if args.quick else ()))
        if "batches" in only:
            bench_batches(work, args.batch_items, 20 if args.quick else 200)
        if "memory" in only:
            bench_memory(work, args.known)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
