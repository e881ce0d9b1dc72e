"""Managers over a folder of real workers held at a gate: the harness of the keeper's tests.

A worker (`worker`) is a shell script that logs `start NAME` to its log, waits until its gate
file exists, logs `done NAME` and exits with the code asked - so a test holds workers running
while it kills a manager, a keeper or a shim, then lets them end when it chooses. `run` is the
`workqueue run` command over a folder of `items` (suffix `.x`, no settling); `rows` reads what
the state directory's ledger recorded, `status_of` what `workqueue status --json` says, and
`kill_mid_run` kills a manager (-9) once as many workers as asked have started, and
`manager_again` starts the next one over the same state (as a restart would);
`run_on_a_thread` runs one item through a `LocalBackend` directly, on a thread of its own.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

from kube_workqueue.manager.backends.local.ledger import SqliteLedger
from kube_workqueue.manager.ports import Cancel
from tests.support.servers import wait_until

WORKER = """#!/bin/sh
name=$(sed -n 's/.*"name":"\\([^"]*\\)".*/\\1/p' "$WORK_ITEM_FILE")
echo "start $name" >> {log}
while [ ! -e {gate} ]; do sleep 0.02; done
echo "done $name" >> {log}
exit {code}
"""


def status_of(state) -> dict:
    """`workqueue status --json` of the state directory `state` ({} when it cannot say)."""
    asked = [
        sys.executable,
        "-m",
        "kube_workqueue.manager.cli",
        "status",
        "--state-dir",
        str(state),
    ]
    done = subprocess.run([*asked, "--json"], capture_output=True, text=True)
    return json.loads(done.stdout) if done.returncode == 0 else {}


def worker(tmp_path: Path, code: int = 0) -> tuple[Path, Path, Path]:
    """A worker that runs until `gate` exists, logging its start and end to `log`."""
    log, gate = tmp_path / "worker.log", tmp_path / "gate"
    script = tmp_path / "worker.sh"
    script.write_text(WORKER.format(log=log, gate=gate, code=code))
    script.chmod(0o755)
    return script, log, gate


def lines(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def items(tmp_path: Path, names: list[str]) -> Path:
    folder = tmp_path / "items"
    folder.mkdir()
    for name in names:
        (folder / name).write_bytes(b"x")
        os.utime(folder / name, (1_000_000_000, 1_000_000_000))
    return folder


def run(folder: Path, state: Path, script: Path, *extra) -> list[str]:
    return [sys.executable, "-m", "kube_workqueue.manager.cli",
            "run", str(folder), "--suffix", ".x",
            "--state-dir", str(state), "--settle", "0", *extra, "--", str(script)]  # fmt: skip


def rows(state: Path) -> dict[str, tuple]:
    with SqliteLedger(str(state)).open(exclusive=False, backups=False) as ledger:
        return {r.name: (r.state, r.attempts, r.exit_code) for r in ledger.rows()}


def kill_mid_run(folder, state, script, log, started: int):
    proc = subprocess.Popen(run(folder, state, script, "--parallelism", "4"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    wait_until(lambda: len(lines(log)) >= started, timeout=60)
    proc.kill()
    proc.wait(30)


@contextlib.contextmanager
def manager_again(command: list[str], state: Path) -> Iterator[subprocess.Popen]:
    """The manager `command` started over `state` after another died, yielded once it is the
    one `workqueue status` names (it has taken over what was running); killed at the block's
    end if it is still running then (the block's duty: `communicate` with it)."""
    again = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: (status_of(state).get("manager") or {}).get("pid") == again.pid, 30)
        yield again
    finally:
        if again.poll() is None:
            again.kill()


def run_on_a_thread(backend, name: str = "a") -> tuple[threading.Thread, list]:
    """`backend.run` of `name` (attempt 1, its data only its name) started on a thread of its
    own: the thread, and the list its outcome is appended to when the run returns."""
    results: list = []
    thread = threading.Thread(
        target=lambda: results.append(backend.run(name, {"name": name}, 1, Cancel()))
    )
    thread.start()
    return thread, results
