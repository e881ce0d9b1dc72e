"""Benchmark of what starting and stopping costs: the ambassador's whole life, and a command's.

Prints, over --rounds rounds (min / median / max), each thing in turn within a round:
  * `workqueue ambassador --workers 2` on a small folder: launch, a listing answered, every
    process of it idle (the master, the snapshot publisher, two workers), SIGTERM, all of them
    ended - its CPU (every process's, reaped) and the seconds to its first answer; beside it the
    same life of a bare gunicorn + Flask "hello" served the same way (`bench.ambassador
    --serve-hello`: two gthread workers), the peer; the ratio of their CPU per round
  * `workqueue status` on a local queue of a few items, and `workqueue run` on an empty folder:
    the CPU of each command, beside the interpreter's own start (`python -c pass`), the floor

Run: .venv/bin/python -m bench.startup [--rounds 7] [--quick]
To compare two trees in one run, put the other one's `src` first on PYTHONPATH for the launched
processes (`PYTHONPATH=/path/to/other/src`): every `workqueue` process then runs that code.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import requests

from bench import parsed, spread
from bench.serving import free_port
from tests.support.servers import descendants

WORKQUEUE = [sys.executable, "-m", "kube_workqueue.manager.cli"]
QUIET_LOOKS = 5  # looks 50 ms apart in which no process of the server used any CPU


def children_cpu() -> float:
    """CPU seconds of every child this process has reaped so far (and of theirs)."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def ticks_of(pid: int) -> int:
    """The CPU ticks (user + system) `pid` has used, or -1 once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return -1
    return int(fields[11]) + int(fields[12])


def wait_quiet(pid: int, processes: int, timeout: float = 60) -> None:
    """Until the server `pid` has `processes` processes and none used CPU for QUIET_LOOKS
    looks in a row: every worker booted and idle."""
    deadline, last, quiet = time.monotonic() + timeout, None, 0
    while quiet < QUIET_LOOKS:
        if time.monotonic() > deadline:
            raise SystemExit(f"the server {pid} never went idle")
        tree = [pid, *descendants(pid)]  # as /proc lists them now
        now = sorted((p, ticks_of(p)) for p in tree)
        quiet = quiet + 1 if now == last and len(tree) >= processes else 0
        last = now
        time.sleep(0.05)


def one_life(command: list[str], url_of, processes: int) -> tuple[float, float]:
    """Launch `command`, wait for an answer at `url_of(first stdout line, port)` and for every
    process to be idle, SIGTERM it and reap it: (its CPU, seconds to its first answer)."""
    port = free_port()
    before = children_cpu()
    launched = time.perf_counter()
    server = subprocess.Popen([a.replace("{port}", str(port)) for a in command],
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    url = url_of(server.stdout, port)
    while True:
        try:
            if requests.get(url, timeout=5).status_code == 200:
                break
        except requests.RequestException:
            pass
        if server.poll() is not None:
            raise SystemExit(f"{command[:5]} ended before it answered")
        time.sleep(0.01)
    answered = time.perf_counter() - launched
    wait_quiet(server.pid, processes)
    server.send_signal(signal.SIGTERM)
    server.wait(60)
    server.stdout.close()
    return children_cpu() - before, answered


def ambassador_url(stdout, port: int) -> str:
    line = stdout.readline()  # "workqueue ambassador: serving … on http://127.0.0.1:PORT"
    found = re.search(r"(http://\S+)", line)
    if not found:
        raise SystemExit(f"the ambassador said {line!r}")
    return found.group(1) + "/api/v1/items"


def command_cpu(args: list[str]) -> float:
    """The CPU seconds of one command, run to its end."""
    before = children_cpu()
    subprocess.run(args, stdout=subprocess.DEVNULL, check=True, timeout=120)
    return children_cpu() - before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parsed(parser, {"rounds": 1})
    work = tempfile.mkdtemp(prefix="bench-startup-")
    try:
        folder, empty, state = (os.path.join(work, n) for n in ("items", "empty", "state"))
        os.makedirs(folder)
        os.makedirs(empty)
        for i in range(3):
            open(os.path.join(folder, f"clip-{i}.mp4"), "w").close()
        subprocess.run([*WORKQUEUE, "run", folder, "--state-dir", state, "--", "true"],
                       stdout=subprocess.DEVNULL, check=True, timeout=120)  # fmt: skip
        ours = [*WORKQUEUE, "ambassador", "--root", folder, "--port", "{port}", "--workers", "2"]
        peer = [sys.executable, "-m", "bench.ambassador", "--serve-hello", "{port}"]
        figures: dict[str, list[float]] = {}
        for _ in range(args.rounds):
            cpu, answered = one_life(ours, ambassador_url, processes=4)
            figures.setdefault("ambassador cpu", []).append(cpu)
            figures.setdefault("ambassador answered", []).append(answered)
            cpu, answered = one_life(
                peer, lambda _out, port: f"http://127.0.0.1:{port}/hello", processes=3
            )
            figures.setdefault("hello cpu", []).append(cpu)
            figures.setdefault("hello answered", []).append(answered)
            figures.setdefault("ratio", []).append(figures["ambassador cpu"][-1] / cpu)
            status = [*WORKQUEUE, "status", "--state-dir", state]
            figures.setdefault("status", []).append(command_cpu(status))
            run = [*WORKQUEUE, "run", empty, "--state-dir", os.path.join(work, "s2"), "--", "true"]
            figures.setdefault("run", []).append(command_cpu(run))
            figures.setdefault("floor", []).append(command_cpu([sys.executable, "-c", "pass"]))
        print(f"{args.rounds} rounds, load {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs "
              "(min / median / max)")  # fmt: skip
        print("ambassador's life, launch to all ended (a publisher, two workers):")
        print(f"  ours:  CPU {spread(figures['ambassador cpu'], '.3f')} s, first answer "
              f"{spread(figures['ambassador answered'], '.3f')} s")  # fmt: skip
        print(f"  bare gunicorn + Flask hello, two workers:  CPU "
              f"{spread(figures['hello cpu'], '.3f')} s, first answer "
              f"{spread(figures['hello answered'], '.3f')} s")  # fmt: skip
        print(f"  ours / hello, CPU per round: {spread(figures['ratio'], '.2f')}")
        print("a command's CPU, s:")
        print(f"  workqueue status (3 items):  {spread(figures['status'], '.3f')}")
        print(f"  workqueue run (empty folder): {spread(figures['run'], '.3f')}")
        print(f"  python -c pass (the floor):   {spread(figures['floor'], '.3f')}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
