"""The random-kill drive (issue: exactly once when the manager dies), printed.

200 items whose workers run 0.5-3 s, `workqueue run` at parallelism 8 killed with -9 at 10
random moments, its whole process group killed once and a SIGHUP once, in a shuffled order,
restarted after each; then a run to the end. Then the same drive with its keeper killed instead
(the manager going on a while without it), and with manager and keeper killed together.
Printed for each: items lost, items completed more than once, worker starts, starts that never
completed, and the ledger's attempts against the starts
(`tests/support/crash_drive.py` does the driving; the e2e test runs a small one).

`--peer DIR` runs the same drive (same seed, same items) with the `manager` package of another
checkout - say the commit before the keeper (`git worktree add /tmp/before <commit>`) - side by
side.

Run: .venv/bin/python -m bench.crash_drive [--items 200] [--seed 1] [--peer DIR] [--quick]
(exits 1 when this checkout lost an item or completed one twice)
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from bench import parsed
from tests.support.crash_drive import drive


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=200)
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--peer", type=Path, help="a checkout to run the same drive with")
    args = parsed(parser, {"items": 12, "kills": 1})
    broken = []
    runs = [("workqueue (this checkout)", None)]
    if args.peer is not None:
        runs.append((f"peer {args.peer}", args.peer.resolve()))
    drives = {  # what is killed: the manager; its keeper; both at once
        "manager": {"kills": args.kills},
        "keeper": {"kills": 0, "group_kills": 0, "hangups": 0, "keeper_kills": args.kills},
        "both": {"kills": 0, "group_kills": 0, "hangups": 0, "both_kills": args.kills},
    }
    for what, kw in drives.items():
        for label, code in runs:
            work = Path(tempfile.mkdtemp(prefix="wq-crash-drive-"))
            try:
                result = drive(work, items=args.items, seed=args.seed, code=code, **kw)
                print(f"{label}, killing {what}: {result.summary()}; last run exit "
                      f"{result.last_exit}")  # fmt: skip
                print("  rounds: " + ", ".join(result.log))
                if code is None and (result.lost or result.completed_twice):
                    broken.append(what)
            finally:
                shutil.rmtree(work, ignore_errors=True)
    if broken:  # the promise, not a figure: this checkout lost an item or ran one twice
        sys.exit(f"this checkout broke the promise killing {', '.join(broken)}")


if __name__ == "__main__":
    main()
