"""Benchmark of the local backend against xargs, measured side by side in the same run.

  1. `true` as the worker, 1,000 and 10,000 items, parallelism 2 and 8: `workqueue run` against
     `xargs -P N` running `true` once per file (goal: ratio <= 1.5 at parallelism 2, and
     parallelism 8 faster than 2 at 10,000 items), and two floors from bench/local_floor.py: a
     15-line Python thread pool, one subprocess per file and nothing recorded; and the same
     doing workqueue's durable steps per item (three SQLite transactions, an item file, a log,
     posix_spawn) the least way.
  2. 200 one-second videos thumbnailed at parallelism 2: `workqueue run` with the thumbnailer
     against `xargs -P 2` running the same worker script on the same files, each with its
     WORK_ITEM_FILE written beforehand (goal ratio <= 1.05).
  3. A ledger of 100,000 finished items and a source listing the same 100,000: the manager's
     RSS (goal < 200 MB) and CPU per poll cycle with no new items (goal < 0.5 s).

Every run gets a fresh state directory, and nothing is deleted until the end: deleting many
files makes the next creations slower for a while on ext4 (its inode allocator checks the
recently deleted ones), which would charge one run for the one before.

Run: .venv/bin/python -m bench.local [--items 1000 10000] [--videos 200] [--ledger-items 100000]
                                     [--quick]
(docs/performance.md quotes figures of `--items 200 --videos 20 --ledger-items 10000`, what
`--quick` ran before it became the smallest form that runs every section.)
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
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

from bench import parsed  # noqa: E402
from tests.support.servers import Server, free_port  # noqa: E402

THUMBNAIL = REPO / "worker-images" / "thumbnailer" / "thumbnail"
WORKQUEUE = [sys.executable, "-m", "kube_workqueue.manager.cli"]


def timed(cmd, **kw) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw)
    return time.perf_counter() - start


def at_rest(folder: Path) -> None:
    for p in folder.iterdir():
        os.utime(p, (1_000_000_000, 1_000_000_000))


@contextmanager
def running_ambassador(folder: Path):
    """An ambassador in its own process (gunicorn, one worker) serving the `.x` files of
    `folder`, all at rest; yields its URL once it is ready - its first scan lists them all."""
    extra = ("--suffix", ".x", "--workers", "1")
    server = Server(folder, free_port(), extra, stderr=subprocess.DEVNULL)
    try:
        server.wait_ready()
        yield server.url
    finally:
        server.stop()


def bench_true(work: Path, counts: list[int], parallelisms: list[int]) -> None:
    for count in counts:
        folder = work / f"true-{count}"
        folder.mkdir()
        for i in range(count):
            (folder / f"{i:05d}.x").touch()
        at_rest(folder)
        ours: dict[int, float] = {}
        for p in parallelisms:
            state = work / f"true-state-{count}-{p}"
            run = [*WORKQUEUE, "run", folder, "--suffix", ".x", "--parallelism", str(p)]
            ours[p] = timed([*run, "--state-dir", state, "--", "true"])
            xargs = timed(
                f"find {folder} -name '*.x' -print0 | xargs -0 -P {p} -n 1 true", shell=True
            )
            pool = [sys.executable, "-m", "bench.local_floor", folder, "--parallelism", str(p)]
            floor = timed(pool)
            durable = timed([*pool, "--durable", work / f"floor-state-{count}-{p}"])
            goal = " (goal <= 1.5)" if p == 2 else ""
            print(
                f"{count:,} items, worker `true`, parallelism {p}: workqueue run {ours[p]:.2f} s "
                f"({ours[p] / count * 1000:.2f} ms/item), xargs -P {p} {xargs:.2f} s, "
                f"ratio {ours[p] / xargs:.2f}{goal}; floors: Python thread pool {floor:.2f} s "
                f"(ratio {floor / xargs:.2f}), the same with workqueue's durable steps "
                f"{durable:.2f} s (ratio {durable / xargs:.2f})"
            )
        if len(parallelisms) > 1:
            low, high = parallelisms[0], parallelisms[-1]
            print(
                f"  parallelism {high} vs {low} at {count:,} items: {ours[high]:.2f} s vs "
                f"{ours[low]:.2f} s ({'faster' if ours[high] < ours[low] else 'not faster'})"
            )


def ffmpeg_env(work: Path) -> dict:
    env = dict(os.environ)
    if shutil.which("ffmpeg") is None:
        import imageio_ffmpeg

        bin_dir = work / "ffmpeg-bin"
        bin_dir.mkdir()
        (bin_dir / "ffmpeg").symlink_to(imageio_ffmpeg.get_ffmpeg_exe())
        env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    return env


def bench_thumbnails(work: Path, count: int) -> None:
    env = ffmpeg_env(work)
    videos = work / "videos"
    subprocess.run(
        [
            sys.executable,
            str(REPO / "examples/thumbnailer/make_videos.py"),
            str(videos),
            "--count",
            str(count),
            "--seconds",
            "1",
        ],
        check=True,
        env=env,
        stdout=subprocess.DEVNULL,
    )
    at_rest(videos)
    items = work / "item-files"
    items.mkdir()
    for video in sorted(videos.iterdir()):
        (items / (video.name + ".json")).write_text(
            json.dumps({"name": video.name, "path": str(video)})
        )
    ours = timed(
        [
            *WORKQUEUE,
            "run",
            videos,
            "--parallelism",
            "2",
            "--state-dir",
            work / "thumb-state",
            "--",
            THUMBNAIL,
        ],
        env=dict(env, OUTPUT_DIR=str(work / "thumbs-ours")),
    )
    xargs = timed(
        f"find {items} -name '*.json' -print0 | "
        f"xargs -0 -P 2 -I{{}} env WORK_ITEM_FILE={{}} {THUMBNAIL}",
        shell=True,
        env=dict(env, OUTPUT_DIR=str(work / "thumbs-xargs")),
    )
    made = len(list((work / "thumbs-ours").glob("*.png")))
    print(
        f"{count} one-second videos thumbnailed, parallelism 2: workqueue run {ours:.2f} s, "
        f"xargs -P 2 {xargs:.2f} s, ratio {ours / xargs:.2f} (goal <= 1.05); {made} PNGs"
    )


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def bench_big_ledger(work: Path, count: int) -> None:
    from kube_workqueue.manager.backends.local.ledger import SqliteLedger

    folder = work / "big"
    folder.mkdir()
    names = [f"{i:06d}.x" for i in range(count)]
    for name in names:
        (folder / name).touch()
    at_rest(folder)
    state = work / "big-state"
    with SqliteLedger(str(state)).open() as ledger:
        ledger.see(names)
        with ledger._db:
            ledger._db.execute(
                "UPDATE items SET state='succeeded', attempts=1, started=0, finished=0"
            )
    with running_ambassador(folder) as url:
        interval = 2.0
        mgr = subprocess.Popen(
            [
                *WORKQUEUE,
                "manager",
                "--source",
                url,
                "--worker-cmd",
                "true",
                "--state-dir",
                state,
                "--poll-interval",
                str(interval),
            ],
            stderr=subprocess.DEVNULL,
        )
        time.sleep(interval * 2)  # start-up and the first polls
        cpu0, t0 = cpu_seconds(mgr.pid), time.monotonic()
        time.sleep(interval * 5)
        cpu1, t1 = cpu_seconds(mgr.pid), time.monotonic()
        polls = (t1 - t0) / interval
        rss = rss_mb(mgr.pid)
        mgr.terminate()
        mgr.wait(20)
        print(
            f"ledger of {count:,} finished items, source listing all of them: manager RSS "
            f"{rss:.0f} MB (goal < 200 MB); CPU per poll with nothing new "
            f"{(cpu1 - cpu0) / polls:.3f} s (goal < 0.5 s)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, nargs="+", default=[1000, 10_000],
                        help="the `true` runs' sizes")  # fmt: skip
    parser.add_argument("--videos", type=int, default=200)
    parser.add_argument("--ledger-items", type=int, default=100_000)
    args = parsed(parser, {"items": [50], "videos": 3, "ledger_items": 2_000})
    work = Path(tempfile.mkdtemp(prefix="wq-bench-local-"))
    try:
        bench_true(work, args.items, [2, 8])
        bench_thumbnails(work, args.videos)
        bench_big_ledger(work, args.ledger_items)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
