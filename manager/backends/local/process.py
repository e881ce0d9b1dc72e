"""The local backend's runner: one child process per item, on this machine.

The worker contract (Burns' work-queue worker interface): the item's `data` is written as JSON
to a private file (mode 0600, in the state directory) named by `WORK_ITEM_FILE`; the command -
split like a shell would split it, but never run through a shell - gets it in its environment,
with the manager's own environment passed through. Exit 0 means succeeded. The item never
reaches argv or a shell string, so quotes, `$(…)`, spaces and unicode in names are just data.

Each child runs in its own process group (a new session), so `--timeout` and shut-down end the
whole group - the command and anything it started - and so does the worker's own exit: whatever
it left running in its group is ended when it exits (SIGTERM, then SIGKILL), success or not. A
worker that wants a daemon to outlive it must detach it on purpose (its own session). stdout and
stderr are appended to one log file per item under `logs/`, each attempt under a header line.

`cancel(name)` (the item left the source) ends the item's process group the same way - at once
if it runs, or as soon as the `run` under way has started it - and that `run` reports the
outcome as cancelled.

If the manager itself is killed (-9), children cannot be told; `record_process` (the ledger's)
keeps each running child's process group and its start time (from /proc), and a restarted
manager ends those groups (`end_process_group`, through `Ledger.recover`) - only if the start
time still matches, so a recycled pid is never hit - before it runs the items again.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

from ...ports import Outcome

KILL_AFTER_TERM_SECONDS = 5.0


def log_file_name(name: str) -> str:
    """A safe, readable, unique file name for an item's log."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", name)[-80:].strip("._") or "item"
    digest = hashlib.sha256(name.encode("utf-8", "surrogateescape")).hexdigest()[:10]
    return f"{slug}-{digest}.log"


def process_start_time(pid: int) -> str | None:
    """The kernel's start time of a process (clock ticks since boot), or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode("ascii", "replace")
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]  # field 22 overall; fields after "(comm)"


def end_process_group(pgid: int, start: str | None) -> None:
    """Kill a process group left behind by a manager that died, if it is still that group."""
    if start is None or process_start_time(pgid) != start:
        return
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class LocalBackend:
    def __init__(
        self,
        argv: list[str],
        state_dir: str,
        *,
        timeout: float | None = None,
        env: dict[str, str] | None = None,
        record_process: Callable[[str, int, str | None], None] | None = None,
    ) -> None:
        """`record_process(name, pgid, start)` is told each child's process group as soon as
        it started (the ledger's `record_process`), so a restart can end it."""
        if not argv:
            raise ValueError("the worker command is empty")
        self.argv = argv
        self.timeout = timeout
        self.env = env
        self.record_process = record_process
        self.items_dir = os.path.join(state_dir, "items")
        self.logs_dir = os.path.join(state_dir, "logs")
        os.makedirs(self.items_dir, mode=0o700, exist_ok=True)
        os.makedirs(self.logs_dir, exist_ok=True)
        self._running: dict[int, subprocess.Popen] = {}
        # Invariants (under _running_lock): _active holds the names inside run(), with their
        # child once it started; _cancelled is the subset of _active asked to end.
        self._active: dict[str, subprocess.Popen | None] = {}
        self._cancelled: set[str] = set()
        self._running_lock = threading.Lock()
        self._stopping = threading.Event()

    def log_path(self, name: str) -> str:
        return os.path.join(self.logs_dir, log_file_name(name))

    def others_running(self) -> int:
        return 0  # every child of this state directory is this manager's own

    def on_change(self, callback: Callable[[], None]) -> None:
        return None  # nothing runs here that the manager did not start

    def cancel(self, name: str) -> bool:
        """End `name`'s process group (SIGTERM, then SIGKILL), now or as soon as it starts;
        its `run` reports it cancelled. False when no `run` of it is under way."""
        with self._running_lock:
            if name not in self._active:
                return False
            self._cancelled.add(name)
            proc = self._active[name]
        if proc is not None:  # ended off the caller's thread: the poller must not wait on it
            threading.Thread(target=self._end, args=(proc,), daemon=True).start()
        return True

    def run(self, name: str, data: dict[str, Any], attempt: int) -> Outcome:
        with self._running_lock:
            self._active[name] = None
        try:
            return self._run(name, data, attempt)
        finally:
            with self._running_lock:
                self._active.pop(name, None)
                self._cancelled.discard(name)

    def _cancelled_outcome(self, name: str, log_path: str, code: int | None = None):
        with self._running_lock:
            if name not in self._cancelled:
                return None
        return Outcome(
            False, exit_code=code, error="cancelled: it left the source", log_path=log_path,
            cancelled=True,
        )  # fmt: skip

    def _run(self, name: str, data: dict[str, Any], attempt: int) -> Outcome:
        log_path = self.log_path(name)
        if self._stopping.is_set():
            return Outcome(False, interrupted=True, log_path=log_path)
        cancelled = self._cancelled_outcome(name, log_path)
        if cancelled is not None:
            return cancelled
        fd, item_file = tempfile.mkstemp(prefix="item-", suffix=".json", dir=self.items_dir)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(data, f, ensure_ascii=False, separators=(",", ":"))
            env = dict(os.environ if self.env is None else self.env)
            env["WORK_ITEM_FILE"] = item_file
            with open(log_path, "ab") as log:
                stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
                log.write(
                    f"=== workqueue: {name} attempt {attempt} at {stamp} ===\n".encode(
                        "utf-8", "replace"
                    )
                )
                log.flush()
                try:
                    proc = subprocess.Popen(
                        self.argv,
                        env=env,
                        stdin=subprocess.DEVNULL,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                        close_fds=True,
                    )
                except OSError as exc:
                    return Outcome(
                        False,
                        error=f"cannot start worker: {exc.strerror}: {self.argv[0]}",
                        log_path=log_path,
                    )
                with self._running_lock:
                    self._running[proc.pid] = proc
                    self._active[name] = proc
                    cancel_now = name in self._cancelled
                try:
                    if self.record_process is not None:
                        self.record_process(name, proc.pid, process_start_time(proc.pid))
                    if cancel_now:  # asked while it was being started
                        self._end(proc)
                    outcome = self._wait(proc, log_path)
                    return self._cancelled_outcome(name, log_path, outcome.exit_code) or outcome
                finally:
                    with self._running_lock:
                        self._running.pop(proc.pid, None)
        finally:
            try:
                os.unlink(item_file)
            except FileNotFoundError:
                pass

    def _wait(self, proc: subprocess.Popen, log_path: str) -> Outcome:
        try:
            code = proc.wait(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            self._end(proc)
            self._end_leftovers(proc.pid)
            return Outcome(
                False, exit_code=None, error=f"timed out after {self.timeout:g}s", log_path=log_path
            )
        self._end_leftovers(proc.pid)
        if self._stopping.is_set() and code != 0:
            return Outcome(False, exit_code=code, interrupted=True, log_path=log_path)
        if code == 0:
            return Outcome(True, exit_code=0, log_path=log_path)
        if code < 0:
            return Outcome(
                False,
                exit_code=code,
                error=f"killed by signal {signal.Signals(-code).name}",
                log_path=log_path,
            )
        return Outcome(False, exit_code=code, error=f"exit code {code}", log_path=log_path)

    def _end(self, proc: subprocess.Popen) -> None:
        """SIGTERM the child's group, SIGKILL it if it is still there a little later."""
        for sig, wait in ((signal.SIGTERM, KILL_AFTER_TERM_SECONDS), (signal.SIGKILL, None)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                return
            try:
                proc.wait(timeout=wait)
                return
            except subprocess.TimeoutExpired:
                continue

    @staticmethod
    def _end_leftovers(pgid: int) -> None:
        """End what a worker left in its process group after it exited: SIGTERM, then SIGKILL
        for what is still there a little later. Nothing left costs one failed signal."""
        for sig, wait in ((signal.SIGTERM, KILL_AFTER_TERM_SECONDS), (signal.SIGKILL, 0.0)):
            try:
                os.killpg(pgid, sig)
            except (ProcessLookupError, PermissionError):
                return
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline:
                try:
                    os.killpg(pgid, 0)
                except (ProcessLookupError, PermissionError):
                    return
                time.sleep(0.02)

    def shutdown(self, grace: float) -> None:
        """Stop: start nothing new; let running children finish for `grace` seconds, then end
        their process groups. Their `run()` calls then report `interrupted`."""
        self._stopping.set()
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            with self._running_lock:
                if not self._running:
                    return
            time.sleep(0.05)
        with self._running_lock:
            left = list(self._running.values())
        for proc in left:
            self._end(proc)
