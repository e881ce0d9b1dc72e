"""Benchmark of the ambassador's snapshot forgetting names: the bucket emptied by half, a
folder's subtree removed.

Prints, for --names listed names (1,000,000 by default) of which --forget (half) go at once:
  * the seconds `Snapshot.forget` takes (goal <= 1 s at 500,000 of 1,000,000);
  * the longest a reader (`page(None, 100)` in a loop on another thread, as list requests do)
    waited meanwhile - the lock is held for the swap, not the work;
  * the same at a size the peer can finish (--peer-names, 200,000 by default), beside the
    peer: the snapshot module of another tree (`--peer /path/to/checkout`, e.g. a worktree
    of the commit before), whose forget deleted one name at a time from the sorted list.

Run: .venv/bin/python -m bench.snapshot [--names 1000000] [--peer /tmp/oldtree] [--quick]
"""

from __future__ import annotations

import argparse
import importlib.util
import threading
import time
from pathlib import Path

from bench import parsed
from kube_workqueue.ambassador.snapshot import Snapshot


def load_snapshot_class(tree: str):
    path = Path(tree) / "ambassador" / "snapshot.py"
    spec = importlib.util.spec_from_file_location("peer_snapshot", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.Snapshot


def filled(snapshot_class, count: int):
    snap = snapshot_class(0, lambda: 1e9)
    snap.observe_many(((f"clip-{i:07d}.mp4", 1, 1) for i in range(count)), initial=True)
    snap.promote_settled()
    assert len(snap) == count
    return snap


def forget_timed(snap, names: list[str]) -> tuple[float, float]:
    """(seconds to forget `names`, the longest one `page` call waited meanwhile)."""
    done = threading.Event()
    longest = [0.0]

    def reader() -> None:
        while not done.is_set():
            began = time.perf_counter()
            snap.page(None, 100)
            longest[0] = max(longest[0], time.perf_counter() - began)
            time.sleep(0.001)

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    began = time.perf_counter()
    snap.forget(names)
    seconds = time.perf_counter() - began
    done.set()
    thread.join()
    return seconds, longest[0]


def every_other(count: int, forget: int) -> list[str]:
    step = max(1, count // forget)
    return [f"clip-{i:07d}.mp4" for i in range(0, count, step)][:forget]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--names", type=int, default=1_000_000)
    parser.add_argument("--forget", type=int, help="how many go (default: half)")
    parser.add_argument("--peer", help="another checkout whose snapshot to measure beside")
    parser.add_argument("--peer-names", type=int, default=200_000)
    args = parsed(parser, {"names": 2_000, "peer_names": 2_000})
    forget = args.forget or args.names // 2

    snap = filled(Snapshot, args.names)
    seconds, waited = forget_timed(snap, every_other(args.names, forget))
    assert len(snap) == args.names - forget
    print(f"forget {forget:,} of {args.names:,}: {seconds:.3f} s (goal <= 1 s); "
          f"a reader waited at most {waited * 1000:.1f} ms")  # fmt: skip

    if args.peer:
        size, half = args.peer_names, args.peer_names // 2
        ours = forget_timed(filled(Snapshot, size), every_other(size, half))
        theirs = forget_timed(filled(load_snapshot_class(args.peer), size), every_other(size, half))
        print(f"forget {half:,} of {size:,}: {ours[0]:.3f} s, a reader waited "
              f"{ours[1] * 1000:.1f} ms; peer {theirs[0]:.3f} s, a reader waited "
              f"{theirs[1] * 1000:.1f} ms; peer/ours {theirs[0] / ours[0]:.0f}x")  # fmt: skip


if __name__ == "__main__":
    main()
