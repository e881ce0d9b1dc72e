"""One client against the ambassador, from loopback (issue: a hostile hand), printed.

An ambassador over 10,000 files (2 workers, 1,024 threads each, as deployed); then, at once for
20 s: 3,000 `?watch=true` requests that never read, 2,500 sockets that send a request line and
one header and then nothing, and four request lines of 4 MB - while a names-only listing is
asked every 50 ms. Printed: the listings' p50 and p99 during the attack (one that never came
counts as its 10 s timeout), how many failed, the ambassador's memory (all its processes)
before, at its peak during the attack (and so what each unread watcher costs at most) and 40 s
after, and its refusals by reason from /metrics. Goal: lists p99 <= 1 s during the attack,
memory back within 10% of before; `--files 100000`: an unread watcher costs tens of kilobytes
whatever the folder's size (its first listing goes out a page at a time, as it is read).

`--peer DIR` runs the same attack on the ambassador of another checkout (say the commit before
the guarded worker: `git worktree add /tmp/before <commit>`), side by side.

Run: .venv/bin/python -m bench.abuse [--seconds 20] [--files 10000] [--peer DIR] [--quick]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

import requests

from bench import parsed
from tests.support.abuse import Attack, percent, run, tree_rss_mb
from tests.support.servers import Server, free_port


def files(folder: Path, count: int) -> None:
    folder.mkdir()
    for i in range(count):
        (folder / f"clip-{i:06d}.mp4").touch()
    for path in folder.iterdir():
        os.utime(path, (1_000_000_000, 1_000_000_000))


def baseline(url: str, n: int = 30) -> tuple[float, float]:
    session, took = requests.Session(), []
    for _ in range(n):
        started = time.monotonic()
        session.get(url + "/api/v1/items", timeout=10).raise_for_status()
        took.append(time.monotonic() - started)
    took.sort()
    return took[len(took) // 2], took[-1]


def refusals_by_reason(url: str) -> dict[str, float]:
    """`ambassador_refused_total` by reason ({} when /metrics cannot be read)."""
    try:
        text = requests.get(url + "/metrics", timeout=10).text
    except requests.RequestException:
        return {}
    found = {}
    for line in text.splitlines():
        if line.startswith("ambassador_refused_total{"):
            reason = line.split('reason="')[1].split('"')[0]
            found[reason] = float(line.split()[-1])
    return found


def refusals(url: str) -> str:
    found = refusals_by_reason(url)
    if not found:
        return "none"
    return ", ".join(f"{reason} {count:.0f}" for reason, count in sorted(found.items()))


def threads_of(pid: int) -> int:
    """The most threads any one process under `pid` has now."""
    most, todo = 0, [pid]
    while todo:
        current = todo.pop()
        try:
            status = Path(f"/proc/{current}/status").read_text()
            most = max(most, int(status.split("Threads:")[1].split()[0]))
            for task in Path(f"/proc/{current}/task").iterdir():
                todo.extend(int(c) for c in (task / "children").read_text().split())
        except (OSError, IndexError):
            continue
    return most


FLOOR = """
import ctypes, threading, time
def rss():
    return int([l for l in open("/proc/self/status") if l.startswith("VmRSS")][0].split()[1])
before = rss(); gate = threading.Event()
def work():
    held = [bytearray(20000) for _ in range(2)]
    gate.wait()
threads = [threading.Thread(target=work) for _ in range({n})]
[t.start() for t in threads]; time.sleep(1); gate.set(); [t.join() for t in threads]
ctypes.CDLL("libc.so.6").malloc_trim(0); time.sleep(0.5)
print(before, rss())
"""


def floor(threads: int) -> str:
    """What a bare Python process keeps after `threads` threads came and went: the floor under
    "memory back after the attack" (CPython and glibc keep pages a burst of threads made)."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", FLOOR.replace("{n}", str(threads))],
                         capture_output=True, text=True, timeout=120).stdout.split()  # fmt: skip
    before, after = int(out[0]) / 1024, int(out[1]) / 1024
    return (f"floor: a bare Python process whose {threads} threads came and went keeps "
            f"{before:.0f} -> {after:.0f} MB ({percent(after, before)})")  # fmt: skip


def one(
    label: str, folder: Path, count: int, attack_shape: Attack, settle: float, code: Path | None
) -> None:
    import threading

    port = free_port()
    server = Server(folder, port, (), cwd=code)
    try:
        server.wait_ready()
        p50, p99 = baseline(server.url)
        before = tree_rss_mb(server.process.pid)
        peak, peak_mb, done = [0], [before], threading.Event()

        def sample() -> None:
            while not done.wait(0.5):
                peak[0] = max(peak[0], threads_of(server.process.pid))
                peak_mb[0] = max(peak_mb[0], tree_rss_mb(server.process.pid))

        threading.Thread(target=sample, daemon=True).start()
        attack = run(server.url, port, attack_shape)
        done.set()
        time.sleep(settle)  # the attack's sockets closed; idle threads end after 30 s
        after = tree_rss_mb(server.process.pid)
        refused = refusals_by_reason(server.url)
        admitted = attack_shape.watches - sum(
            refused.get(reason, 0) for reason in ("watches", "watches_per_client")
        )
        each_kb = (peak_mb[0] - before) * 1024 / max(1, admitted)
        print(f"{label}: lists before the attack p50 {p50:.3f} s, p99 {p99:.3f} s; "
              f"{attack.summary()} (answers {dict(sorted(attack.codes.items()))}); "
              f"memory {before:.0f} MB before, {peak_mb[0]:.0f} MB at most during the attack "
              f"(at most {each_kb:.0f} KB for each of the {admitted:,.0f} unread watches "
              f"admitted on {count:,} items, its thread and the attack's other sockets "
              f"included), "
              f"{after:.0f} MB {settle:.0f} s after ({percent(after, before)}), "
              f"{peak[0]} threads at most in a worker; "
              f"refused: {refusals(server.url)}")  # fmt: skip
        print(f"  {floor(peak[0])}")
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--files", type=int, default=10_000, help="the folder's size")
    parser.add_argument("--peer", type=Path, help="a checkout whose ambassador gets the same")
    parser.add_argument("--settle", type=float, default=40.0,
                        help="how long after the attack the memory is read (idle threads end "
                             "after 30 s)")  # fmt: skip
    args = parsed(parser, {"seconds": 1.0, "files": 100, "settle": 0.0})
    # The quick form's attack: a tenth of the sockets, one long line - every kind still sent.
    shape = Attack(seconds=args.seconds, watches=300, slow_heads=250, long_lines=1) \
        if args.quick else Attack(seconds=args.seconds)  # fmt: skip
    work = Path(tempfile.mkdtemp(prefix="wq-bench-abuse-"))
    try:
        folder = work / "videos"
        files(folder, args.files)
        one("workqueue (this checkout)", folder, args.files, shape, args.settle, None)
        if args.peer is not None:
            one(f"peer {args.peer}", folder, args.files, shape, args.settle, args.peer.resolve())
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
