"""Benchmark of `workqueue run`'s cost per item against xargs, in CPU as well as wall time.

--items `true` items (10,000 by default) at parallelism 2: `workqueue run` and `xargs -P 2`
running `true` once per file, in turn (A, B, A, B, ...) --runs times each, every run with a fresh
state directory. For each: the wall time and the CPU of its whole process tree (user + system,
from the rusage of the waited-for children: the manager and every worker it spawned, or the
shell, find, xargs and every `true`). Medians, and the ratios of the medians (goals: CPU <= 1.2x
xargs', wall <= 1.3x). The floors beside them: bench/local_floor.py --durable, the least Python
that does workqueue's durable steps per item (three SQLite transactions, an item file, a log, a
spawn), and the same with --kept, its workers started by a keeper process that journals each
start and end (what lets workqueue's workers outlive a killed manager), and the same with --shim,
each worker started by its slot's shim as workqueue's are (what keeps a worker's end when the
keeper dies), measured the same way.

Run: .venv/bin/python -m bench.local_cpu [--items 10000] [--runs 5] [--quick]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WORKQUEUE = [sys.executable, "-m", "kube_workqueue.manager.cli"]

from bench import parsed  # noqa: E402
from bench.kubernetes import folder_of  # noqa: E402


def measured(command, **kw) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the whole process tree) of one run of `command`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   cwd=REPO, **kw)  # fmt: skip
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--parallelism", type=int, default=2)
    args = parsed(parser, {"items": 50, "runs": 1})
    work = Path(tempfile.mkdtemp(prefix="wq-local-cpu-"))
    try:
        compared(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def compared(args: argparse.Namespace, work: Path) -> None:
    """The paired runs in `work`, and their medians printed."""
    folder = folder_of(args.items, work)
    p = str(args.parallelism)
    runs: dict[str, list[tuple[float, float]]] = {
        "workqueue run": [], "xargs": [], "floor": [], "floor, kept": [], "floor, shim": []
    }  # fmt: skip
    for i in range(args.runs):
        state = work / f"state-{i}"
        runs["workqueue run"].append(measured([*WORKQUEUE, "run", folder, "--suffix", ".x",
                                               "--parallelism", p, "--state-dir", state,
                                               "--", "true"]))  # fmt: skip
        runs["xargs"].append(measured(f"find {folder} -name '*.x' -print0 | xargs -0 -P {p} "
                                      "-n 1 true", shell=True))  # fmt: skip
        runs["floor"].append(measured([sys.executable, "-m", "bench.local_floor", folder,
                                       "--parallelism", p, "--durable",
                                       work / f"floor-{i}"]))  # fmt: skip
        runs["floor, kept"].append(measured([sys.executable, "-m", "bench.local_floor", folder,
                                             "--parallelism", p, "--durable",
                                             work / f"kept-{i}", "--kept"]))  # fmt: skip
        runs["floor, shim"].append(measured([sys.executable, "-m", "bench.local_floor", folder,
                                             "--parallelism", p, "--durable",
                                             work / f"shim-{i}", "--kept", "--shim"]))  # fmt: skip
    median = {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v))
              for k, v in runs.items()}  # fmt: skip
    xw, xc = median["xargs"]
    one, five, _ = os.getloadavg()
    print(f"{args.items:,} `true` items, parallelism {p}, medians of {args.runs} paired runs "
          f"(load {one:.1f}/{five:.1f} on {os.cpu_count()} CPUs):")  # fmt: skip
    for label, (wall, cpu) in median.items():
        print(f"  {label:<14} wall {wall:6.2f} s ({wall / xw:.2f}x xargs)   CPU {cpu:6.2f} s "
              f"({cpu / xc:.2f}x xargs, {cpu / args.items * 1000:.2f} ms/item)")  # fmt: skip
    ww, wc = median["workqueue run"]
    print(f"goals: CPU {wc / xc:.2f}x xargs (<= 1.2), wall {ww / xw:.2f}x (<= 1.3)")


if __name__ == "__main__":
    main()
