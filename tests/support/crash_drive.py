"""The random-kill drive: `workqueue run` killed again and again while its workers run, restarted
each time, and every item's starts and completions counted - what `bench/crash_drive.py`
prints and `tests/e2e/test_crash_drive.py` asserts.

The folder holds `items` files; a file's size is its worker's run time in hundredths of a second
(so each item's duration is known from its data, the same on every start). The worker appends
"start NAME" when it starts and "done NAME" when it finishes to one log (O_APPEND: one write
each, never torn), so the log, not the ledger, says what really ran.

Each round starts `workqueue run` in a session of its own, waits a random moment, and ends it
one of five ways: SIGKILL to the manager, SIGKILL to its whole process group, SIGHUP (a
closed terminal, handled as SIGTERM: running work gets the grace period), SIGKILL to its
keeper (the manager lives on a random moment more, then gets SIGHUP), or SIGKILL to the
manager and its keeper together. After the last round a run goes to the end. Then:

    lost                  items never completed
    completed twice       items completed more than once (the promise: none)
    starts, interrupted   worker starts, and starts that never completed
    attempts              the ledger's attempts, summed (the promise: = starts)
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.peer_code import peer_code

WORKER = """#!/bin/sh
name=$(sed -n 's/.*"name":"\\([^"]*\\)".*/\\1/p' "$WORK_ITEM_FILE")
size=$(sed -n 's/.*"size":\\([0-9]*\\).*/\\1/p' "$WORK_ITEM_FILE")
echo "start $name" >> {log}
sleep "$((size / 100)).$(printf %02d $((size % 100)))"
echo "done $name" >> {log}
"""


@dataclass
class Drive:
    items: int
    log: list[str] = field(default_factory=list)  # what happened, round by round
    starts: Counter = field(default_factory=Counter)
    done: Counter = field(default_factory=Counter)
    attempts: int = 0
    last_exit: int | None = None

    @property
    def lost(self) -> int:
        return self.items - len(self.done)

    @property
    def completed_twice(self) -> int:
        return sum(1 for n in self.done.values() if n > 1)

    @property
    def interrupted(self) -> int:
        return sum(self.starts.values()) - sum(self.done.values())

    def summary(self) -> str:
        return (
            f"{self.items} items, {len(self.log)} kills: {self.lost} lost, "
            f"{self.completed_twice} completed more than once; {sum(self.starts.values())} "
            f"worker starts, {self.interrupted} interrupted; ledger attempts "
            f"{self.attempts} (starts {sum(self.starts.values())})"
        )


def keepers_of(manager_pid: int) -> list[int]:
    """The pids of the keepers a manager started (its children running keeper.py)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_bytes().rsplit(b")", 1)[1].split()
            command = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if int(stat[1]) == manager_pid and b"keeper.py" in command:
            found.append(int(entry))
    return found


def make_items(folder: Path, count: int, rng: random.Random, low: float, high: float) -> None:
    folder.mkdir(parents=True)
    for i in range(count):
        centiseconds = int(rng.uniform(low, high) * 100)
        (folder / f"item-{i:04d}.x").write_bytes(b"x" * centiseconds)
    past = time.time() - 3600
    for path in folder.iterdir():
        os.utime(path, (past, past))


def drive(
    work: Path,
    *,
    items: int = 200,
    kills: int = 10,
    group_kills: int = 1,
    hangups: int = 1,
    keeper_kills: int = 0,
    both_kills: int = 0,
    parallelism: int = 8,
    low: float = 0.5,
    high: float = 3.0,
    seed: int = 1,
    between: tuple[float, float] = (0.5, 4.0),
    code: Path | None = None,
) -> Drive:
    """Run the drive in `work` (made); see the module docstring. `code`: a checkout whose
    code runs instead of the installed one (a peer: the code before a change; tests/support/
    peer_code.py says how)."""
    rng = random.Random(seed)
    folder, state, log = work / "items", work / "state", work / "worker.log"
    make_items(folder, items, rng, low, high)
    worker = work / "worker.sh"
    worker.write_text(WORKER.format(log=log))
    worker.chmod(0o755)
    peer = peer_code(code)
    command = [*peer.command, "run", str(folder), "--suffix", ".x",
               "--parallelism", str(parallelism), "--state-dir", str(state), "--settle", "0",
               "--log-level", "debug", "--", str(worker)]  # fmt: skip
    ends = ["kill"] * kills + ["group"] * group_kills + ["hangup"] * hangups
    ends += ["keeper"] * keeper_kills + ["both"] * both_kills
    rng.shuffle(ends)
    result = Drive(items)
    for how in ends:
        # each manager's log kept beside the items: what it took back, should a drive fail
        with open(work / f"manager-{len(result.log) + 1}-{how}.log", "w") as said:
            proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=said,
                                    start_new_session=True, cwd=peer.cwd, env=peer.env)  # fmt: skip
        time.sleep(rng.uniform(*between))
        if proc.poll() is not None:  # it finished everything already
            result.log.append(f"{how}: the run had ended (exit {proc.returncode})")
            break
        if how == "kill":
            proc.send_signal(signal.SIGKILL)
        elif how in ("keeper", "both"):
            keepers = keepers_of(proc.pid)
            if how == "both":
                proc.send_signal(signal.SIGKILL)
            for keeper in keepers:
                os.kill(keeper, signal.SIGKILL)
            if how == "keeper":  # the manager goes on without it a while, then is stopped
                time.sleep(rng.uniform(*between))
                proc.send_signal(signal.SIGHUP)
        elif how == "group":
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.send_signal(signal.SIGHUP)
        proc.wait(timeout=120)
        result.log.append(f"{how}: exit {proc.returncode}")
    final = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           timeout=600, cwd=peer.cwd, env=peer.env)  # fmt: skip
    result.last_exit = final.returncode
    for line in log.read_text().splitlines():
        what, name = line.split(" ", 1)
        (result.starts if what == "start" else result.done)[name] += 1
    db = sqlite3.connect(f"file:{state / 'ledger.sqlite3'}?mode=ro", uri=True)
    try:
        result.attempts = db.execute("SELECT COALESCE(SUM(attempts), 0) FROM items").fetchone()[0]
        result.attempts += db.execute("SELECT COALESCE(SUM(attempts), 0) FROM runs").fetchone()[0]
    finally:
        db.close()
    return result
