"""One operator for many queues, measured on the API-server stand-in - `python -m bench.operator
[--queues 1,10,50] [--rest-seconds 60] [--quick]`.

For each count N, a fresh stand-in (the chart's CRD installed, a kubelet that completes every
Job at once) and a fresh `workqueue operator --namespace media` process; N WorkQueues, each
reading the same items API (one local ambassador over a folder of 3 files: the queues' own
ambassador pods are measured apart, below), applied with one `kubectl apply`:

    apply -> first Job   from the apply's start to each queue's first Job (median, slowest)
    at rest              once every queue is Ready and idle: the operator's CPU seconds over
                         --rest-seconds (per minute), and its resident memory
    patch -> effect      `kubectl patch` of one queue's spec.parallelism to the status saying
                         it (status.replicas: what the manager runs with)
    delete -> gone       `kubectl delete` of one queue to the last object it owned gone

Goals (issue 48): 50 queues at rest <= 1 CPU-second a minute and <= 300 MB; apply -> first
Job <= 10 s; patch -> effect <= 2 s.

The peer is the chart's per-queue mode: a manager pod per queue. One `workqueue manager`
process for one such queue (the same items API, the same stand-in) is measured at rest the
same way, so "N queues as N releases" is N times its figures. Beside either shape, a queue
whose source the ambassador serves has its own ambassador pod: one `workqueue ambassador`
process over the folder is measured too.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from bench import parsed
from bench.kubernetes import cpu_seconds
from bench.local import rss_mb
from tests.support.apiserver import ApiServer
from tests.support.kubelet import Kubelet
from tests.support.servers import Server, free_port, wait_until

ROOT = Path(__file__).resolve().parents[1]
CRD = ROOT / "charts/workqueue/crds/workqueues.workqueue.dev.yaml"
NS = "media"
SETTLE = 5.0  # seconds for the last status writes (or a manager's start-up) before a rest


def at_rest(pid: int, seconds: float) -> tuple[float, float]:
    """(CPU seconds a minute, resident MB) of a process left alone for `seconds`."""
    before = cpu_seconds(pid)
    time.sleep(seconds)
    return (cpu_seconds(pid) - before) * 60 / seconds, rss_mb(pid)


def kubectl(kubeconfig: str, *args: str, stdin: str | None = None) -> None:
    done = subprocess.run(["kubectl", "--kubeconfig", kubeconfig, "-n", NS, *args],
                          input=stdin, capture_output=True, text=True, timeout=120)  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"kubectl {args[0]}: {done.stderr.strip()}")


def queue_doc(name: str, url: str) -> dict:
    return {"apiVersion": "workqueue.dev/v1beta1", "kind": "WorkQueue",
            "metadata": {"name": name},
            "spec": {"source": {"url": url}, "worker": {"image": "worker:1", "command": ["true"]},
                     "parallelism": 2}}  # fmt: skip


def first_job_times(server: ApiServer, names: list[str], start: float) -> list[float]:
    """Seconds from `start` to each queue's first Job (waits for all)."""
    seen: dict[str, float] = {}

    def every_queue_has_one() -> bool:
        for (kind, _, _), obj in list(server.store.objects.items()):
            if kind != "jobs":
                continue
            queue = (obj["metadata"].get("labels") or {}).get("workqueue.dev/queue")
            if queue in names and queue not in seen:
                made = obj["metadata"].get("creationTimestamp")
                seen[queue] = time.time() - start if made else 0.0
        return len(seen) == len(names)

    wait_until(every_queue_has_one, timeout=600, interval=0.01, most=0.05)
    return sorted(seen.values())


def one_count(count: int, rest: float, items_url: str, work: Path) -> dict:
    server = ApiServer(history=200_000).start()
    server.store.install_crd(yaml.safe_load(CRD.read_text()))
    Kubelet(server, instant=True)
    kubeconfig = server.write_kubeconfig(work / f"kubeconfig-{count}")
    log = open(work / f"operator-{count}.log", "wb")  # noqa: SIM115 (the child's stderr)
    operator = subprocess.Popen(
        [sys.executable, "-m", "kube_workqueue.manager.cli", "operator", "--namespace", NS,
         "--kubeconfig", kubeconfig, "--kube-api-qps", "0", "--log-level", "warning",
         "--lease", f"{NS}/workqueue-operator"],
        stdout=subprocess.DEVNULL, stderr=log,
    )  # fmt: skip
    try:
        time.sleep(2)  # its first list of WorkQueues (an empty one) is in
        names = [f"q{i:03d}" for i in range(count)]
        docs = yaml.safe_dump_all([queue_doc(n, items_url) for n in names])
        start = time.time()
        kubectl(kubeconfig, "apply", "--validate=false", "-f", "-", stdin=docs)
        firsts = first_job_times(server, names, start)

        def ready(name: str) -> bool:
            obj = server.store.objects.get(("workqueues", NS, name)) or {}
            status = obj.get("status") or {}
            counts = status.get("counts") or {}
            return counts.get("succeeded") == 3 and any(
                c["type"] == "Ready" and c["status"] == "True"
                for c in status.get("conditions") or []
            )

        wait_until(lambda: all(ready(n) for n in names), timeout=600, most=0.5)
        time.sleep(SETTLE)  # the last status writes settle
        cpu_minute, rss = at_rest(operator.pid, rest)
        start = time.monotonic()
        kubectl(kubeconfig, "patch", "workqueue", names[0], "--type", "merge",
                "-p", '{"spec":{"parallelism":5}}')  # fmt: skip

        def scaled() -> bool:
            status = server.store.objects[("workqueues", NS, names[0])].get("status") or {}
            return status.get("replicas") == 5

        wait_until(scaled, timeout=120, interval=0.005, most=0.02)
        patched = time.monotonic() - start
        uid = server.store.objects[("workqueues", NS, names[-1])]["metadata"]["uid"]

        def gone() -> bool:
            return ("workqueues", NS, names[-1]) not in server.store.objects and not any(
                ref.get("uid") == uid
                for o in list(server.store.objects.values())
                for ref in o["metadata"].get("ownerReferences") or []
            )

        start = time.monotonic()
        kubectl(kubeconfig, "delete", "workqueue", names[-1], "--wait=false")
        wait_until(gone, timeout=120, interval=0.005, most=0.02)
        deleted = time.monotonic() - start
        return {"queues": count, "first_p50": statistics.median(firsts),
                "first_max": firsts[-1], "cpu_minute": cpu_minute, "rss": rss,
                "patch": patched, "delete": deleted}  # fmt: skip
    finally:
        operator.terminate()
        operator.wait(60)
        log.close()
        server.stop()


def per_queue_manager(rest: float, items_url: str, work: Path) -> tuple[float, float]:
    """One queue as the chart's per-queue mode runs it: a `workqueue manager` process."""
    server = ApiServer(history=50_000).start()
    server.store.install_crd(yaml.safe_load(CRD.read_text()))
    Kubelet(server, instant=True)
    kubeconfig = server.write_kubeconfig(work / "kubeconfig-peer")
    manager = subprocess.Popen(
        [sys.executable, "-m", "kube_workqueue.manager.cli", "manager", "--backend", "kubernetes",
         "--source", items_url, "--namespace", NS, "--queue", "peer", "--image", "worker:1",
         "--command", "true", "--kubeconfig", kubeconfig, "--kube-api-qps", "0",
         "--leader-elect", "--log-level", "warning"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_until(lambda: sum(1 for k in server.store.objects if k[0] == "jobs") >= 3, timeout=120)
        time.sleep(SETTLE)
        return at_rest(manager.pid, rest)
    finally:
        manager.terminate()
        manager.wait(60)
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--queues", default="1,10,50")
    parser.add_argument("--rest-seconds", type=float, default=60.0)
    args = parsed(parser, {"queues": "2", "rest_seconds": 1.0})
    if args.quick:
        global SETTLE
        SETTLE = 0.5
    counts = [int(n) for n in args.queues.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        folder = work / "items"
        folder.mkdir()
        for i in range(3):
            (folder / f"clip-{i}.mp4").write_bytes(b"video")
        ambassador = Server(folder, free_port(), ())
        ambassador.wait_ready()
        try:
            print(f"{'queues':>6} {'apply->Job p50':>15} {'max':>7} {'CPU s/min':>10} "
                  f"{'RSS MB':>8} {'patch->effect':>14} {'delete->gone':>13}")  # fmt: skip
            for count in counts:
                r = one_count(count, args.rest_seconds, ambassador.url, work)
                print(f"{r['queues']:>6} {r['first_p50']:>14.2f}s {r['first_max']:>6.2f}s "
                      f"{r['cpu_minute']:>10.2f} {r['rss']:>8.1f} {r['patch']:>13.2f}s "
                      f"{r['delete']:>12.2f}s", flush=True)  # fmt: skip
            cpu, rss = per_queue_manager(args.rest_seconds, ambassador.url, work)
            print(f"\nthe peer, a per-queue manager process (the chart's mode: one per queue): "
                  f"{cpu:.2f} CPU s/min, {rss:.1f} MB at rest")  # fmt: skip
            for count in counts:
                print(f"  {count} queues as {count} manager processes: {cpu * count:.2f} CPU "
                      f"s/min, {rss * count:.0f} MB")  # fmt: skip
            ambassador_rss = rss_mb(ambassador.process.pid)
            print(f"a queue's own ambassador (bucket, Redis, stream or folder source), beside "
                  f"either shape: {ambassador_rss:.1f} MB resident (a 3-item folder)")  # fmt: skip
        finally:
            ambassador.stop()


if __name__ == "__main__":
    main()
