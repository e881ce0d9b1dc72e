"""A tenant's hostile pattern, measured - `python -m bench.hostile_patterns [--seconds 20]`
(`--quick`: the smallest form).

Two figures, each beside what Python's own engine (`re`) does with the same pattern:

    one name     the time `--group '^(a+)+$'` takes on `aaaa…!` of n characters: RE2 (what
                 the manager matches with, `manager.patterns`) against `re`, whose time doubles
                 with every character (`re` is stopped at --re-limit seconds and said so)
    the operator the attacker's WorkQueue (`spec.group: '^(a+)+$'`, items `a…a!` of 28-31
                 characters) beside a healthy queue, on the API-server stand-in: how long each
                 queue takes to run its four items, and /healthz's answer times (p50, p99, max)
                 sampled every 0.1 s throughout - the finding was a /healthz that timed out for
                 ~185 s, every other queue held and a CPU burnt
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
import tempfile
import time
from pathlib import Path

import requests
import yaml

from bench import parsed
from kube_workqueue.manager.patterns import compile_regex
from tests.operator.conftest import NS, Operated, marks
from tests.support.servers import Server, free_port, wait_until

PATTERN = "^(a+)+$"


def _python_re(length: int, answer) -> None:
    import re

    started = time.perf_counter()
    re.compile(PATTERN).search("a" * length + "!")
    answer.put(time.perf_counter() - started)


def python_re_seconds(length: int, limit: float) -> float | None:
    """`re`'s time on a name of `length`, or None when it took longer than `limit`."""
    answer = multiprocessing.Queue()
    child = multiprocessing.Process(target=_python_re, args=(length, answer))
    child.start()
    child.join(limit)
    if child.is_alive():
        child.kill()
        child.join()
        return None
    return answer.get()


def re2_seconds(length: int, repeat: int = 1000) -> float:
    pattern = compile_regex(PATTERN)
    name = "a" * length + "!"
    started = time.perf_counter()
    for _ in range(repeat):
        pattern.search(name)
    return (time.perf_counter() - started) / repeat


def one_name(limit: float, lengths=(16, 20, 22, 24, 26, 28, 31)) -> None:
    print(f"{'length':>6} {'RE2':>12} {'re (Python)':>14}")
    for length in lengths:
        theirs = python_re_seconds(length, limit)
        shown = f"{theirs * 1000:.1f} ms" if theirs is not None else f"> {limit:.0f} s"
        print(f"{length:>6} {re2_seconds(length) * 1e6:>9.2f} us {shown:>14}", flush=True)


def queue(name: str, url: str, worker: Path, markers: Path, **spec) -> dict:
    return {
        "apiVersion": "workqueue.dev/v1beta1",
        "kind": "WorkQueue",
        "metadata": {"name": name},
        "spec": {
            "source": {"url": url},
            "pollInterval": "1s",
            "parallelism": 2,
            "worker": {
                "image": "w:1",
                "command": [str(worker)],
                "env": [{"name": "MARKERS", "value": str(markers)}],
            },
            **spec,
        },
    }


def the_operator(work: Path, seconds: float) -> None:
    operated = Operated(work)
    servers = []
    try:
        folders = {"attacked": [f"{'a' * (28 + i)}!.mp4" for i in range(4)],
                   "healthy": [f"v{i}.mp4" for i in range(4)]}  # fmt: skip
        docs = []
        for name, files in folders.items():
            folder = work / name
            folder.mkdir()
            for file in files:
                (folder / file).write_bytes(b"video")
            server = Server(folder, free_port(), ())
            server.wait_ready()
            servers.append(server)
            extra = {"group": PATTERN, "limits": ["*=1"]} if name == "attacked" else {}
            docs.append(queue(name, server.url, operated.worker, work / f"{name}.marks", **extra))
        health = free_port()
        operated.start_operator("--health-port", str(health))
        wait_until(lambda: _answers(health) is not None, timeout=60)
        start = time.monotonic()
        operated.kubectl("apply", "--validate=false", "-n", NS, "-f", "-",
                         stdin=yaml.safe_dump_all(docs))  # fmt: skip
        done: dict[str, float] = {}
        answers: list[float] = []
        while time.monotonic() - start < seconds or len(done) < 2:
            took = _answers(health)
            answers.append(took if took is not None else 10.0)
            for name in folders:
                if name not in done and len(marks(work / f"{name}.marks")) >= 4:
                    done[name] = time.monotonic() - start
            if time.monotonic() - start > 600:
                break
            time.sleep(0.1)
        answers.sort()
        p99 = answers[min(len(answers) - 1, int(len(answers) * 0.99))]
        for name in folders:
            took = f"{done[name]:.2f} s" if name in done else "not done in 600 s"
            print(f"{name:>9}: its 4 items ran in {took}")
        print(f"/healthz over {len(answers)} looks: p50 {statistics.median(answers) * 1000:.1f} "
              f"ms, p99 {p99 * 1000:.1f} ms, max {answers[-1] * 1000:.1f} ms "
              f"(a look that timed out counts 10 s)")  # fmt: skip
    finally:
        for server in servers:
            server.stop()
        operated.close()


def _answers(port: int) -> float | None:
    started = time.perf_counter()
    try:
        requests.get(f"http://127.0.0.1:{port}/healthz", timeout=10).raise_for_status()
    except requests.RequestException:
        return None
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="how long /healthz is asked")
    parser.add_argument("--re-limit", type=float, default=30.0)
    args = parsed(parser, {"seconds": 1.0, "re_limit": 1.0})
    print(f"{PATTERN!r} on one name 'a'*n + '!' (python {sys.version.split()[0]})")
    one_name(args.re_limit, *([(12, 16, 20)] if args.quick else []))
    print("\nthe attacker's WorkQueue beside a healthy one, one operator (the stand-in)")
    with tempfile.TemporaryDirectory() as tmp:
        the_operator(Path(tmp), args.seconds)


if __name__ == "__main__":
    main()
