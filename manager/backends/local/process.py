"""The local backend's runner: one child process per item, on this machine.

The worker contract (Burns' work-queue worker interface): the item's `data` is written as JSON
to a private file (mode 0600, in the state directory) named by `WORK_ITEM_FILE`; the command -
split like a shell would split it, but never run through a shell - gets it in its environment,
with the manager's own environment passed through. Children are started by `spawn.py`
(posix_spawn, the program looked up once) - the cheapest start Python has. Exit 0 means
succeeded. The item never reaches argv or a shell string, so quotes, `$(…)`, spaces and unicode
in names are just data.

Each child runs in its own process group (a new session), so `--timeout` and shut-down end the
whole group - the command and anything it started - and so does the worker's own exit: whatever
it left running in its group is ended when it exits (SIGTERM, then SIGKILL), success or not. A
worker that wants a daemon to outlive it must detach it on purpose (its own session). stdout and
stderr are appended to one log file per item under `logs/`, each attempt under a header line.

A run's `Cancel` (`manager.ports.Cancel`: the item left the source) ends the item's process
group the same way - at once if it runs, as soon as it is started if the cancel came first -
and the run reports the outcome as cancelled; set before anything started, nothing starts.

If the manager itself is killed (-9), children cannot be told; `record_process` (the ledger's)
keeps each running child's process group and its start time (from /proc), and a restarted
manager ends those groups (`end_process_group`, through `SqliteLedger.recover`) - only if the start
time still matches, so a recycled pid is never hit - before it runs the items again.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import logging
import os
import re
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

from ...faults import StorageFault, diagnose, raised_as_faults
from ...ports import Cancel, Outcome
from .spawn import Child, Spawner

KILL_AFTER_TERM_SECONDS = 5.0
log = logging.getLogger(__name__)


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


@functools.lru_cache(maxsize=4096)  # asked twice per dispatch (reconciler and run)
def log_file_name(name: str) -> str:
    """A safe, readable, unique file name for an item's log."""
    slug = _UNSAFE.sub("_", name)[-80:].strip("._") or "item"
    digest = hashlib.sha256(name.encode("utf-8", "surrogateescape")).hexdigest()[:10]
    return f"{slug}-{digest}.log"


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
SAME_START_TICKS = CLOCK_TICKS  # two start times this close (1 s) are one process's


def process_start_time(pid: int) -> str | None:
    """The kernel's start time of a process (clock ticks since boot), or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode("ascii", "replace")
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]  # field 22 overall; fields after "(comm)"


def started_now() -> str:
    """The start time, in the kernel's terms (clock ticks since boot), of a process started
    just now: read from the clock the kernel uses, not from /proc - three system calls fewer
    per item on the dispatch path. `end_process_group` allows for the difference."""
    return str(int(time.clock_gettime(time.CLOCK_BOOTTIME) * CLOCK_TICKS))


def end_process_group(pgid: int, start: str | None) -> None:
    """Kill a process group left behind by a manager that died, if it is still that group: its
    leader started when the ledger says (within a second; pids are not reused that fast)."""
    actual = process_start_time(pgid)
    try:
        if start is None or actual is None or abs(int(actual) - int(start)) > SAME_START_TICKS:
            return
    except ValueError:  # not a start time: nothing proves the group is ours
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
        self._spawner: Spawner | None = None  # made at the first run: a missing program fails
        self._free_slots: list[tuple[int, int]] = []  # item-file slots not in use, open
        self._slots = itertools.count()  # that item, not the manager's start
        self.record_process = record_process
        self.state_dir = state_dir
        self.items_dir = os.path.join(state_dir, "items")
        self.logs_dir = os.path.join(state_dir, "logs")
        os.makedirs(self.items_dir, mode=0o700, exist_ok=True)
        os.makedirs(self.logs_dir, exist_ok=True)
        # Invariant (under _running_lock): the children started and not yet reaped, by pid.
        self._running: dict[int, Child] = {}
        self._running_lock = threading.Lock()
        self._stopping = threading.Event()

    def log_path(self, name: str) -> str:
        return os.path.join(self.logs_dir, log_file_name(name))

    def others_running(self) -> int:
        return 0  # every child of this state directory is this manager's own

    def on_change(self, callback: Callable[[], None]) -> None:
        return None  # nothing runs here that the manager did not start

    def cancel_elsewhere(self, name: str) -> bool:
        """Nothing of this state directory runs outside its manager (a manager that died left
        process groups that its successor ends at start): nothing to end."""
        return False

    def run(self, name: str, data: dict[str, Any], attempt: int, cancel: Cancel) -> Outcome:
        log_path = self.log_path(name)
        if self._stopping.is_set():
            return Outcome(False, interrupted=True, log_path=log_path)
        if cancel.is_set():
            return _cancelled(log_path)
        # The item file is one of a few slot files, kept open and rewritten in place (written,
        # then cut to length): one per unit of work running at once, never two at a time.
        # Creating and deleting a file per item made ext4's inode allocator the dispatch's
        # bottleneck (it scans recently deleted inodes on every create), and truncating to
        # zero before each write cost 90 us (blocks freed and allocated again); this is 3 us.
        with raised_as_faults(self.state_dir):
            slot, slot_fd = self._take_slot()
        item_file = os.path.join(self.items_dir, f"item-{slot}.json")
        try:
            with raised_as_faults(self.state_dir):
                body = json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()
                os.pwrite(slot_fd, body, 0)  # a regular file takes it whole
                os.ftruncate(slot_fd, len(body))
                flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC
                log_fd = os.open(log_path, flags, 0o644)
            try:
                stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
                header = f"=== workqueue: {name} attempt {attempt} at {stamp} ===\n"
                with raised_as_faults(self.state_dir):
                    os.write(log_fd, header.encode("utf-8", "replace"))
                try:
                    if self._spawner is None:
                        self._spawner = Spawner(self.argv, self.env)
                    proc = self._spawner.start(log_fd, {"WORK_ITEM_FILE": item_file})
                except OSError as exc:
                    return Outcome(
                        False,
                        error=f"cannot start worker: {exc.strerror}: {self.argv[0]}",
                        log_path=log_path,
                    )
            finally:
                os.close(log_fd)
            with self._running_lock:
                self._running[proc.pid] = proc
            # Ended off the canceller's thread: the poller that noticed the removal must not
            # wait for a worker's grace period (and at once if the cancel came first).
            forget = cancel.on_set(
                lambda: threading.Thread(
                    target=proc.end, args=(KILL_AFTER_TERM_SECONDS,), daemon=True
                ).start()
            )
            try:
                self._record_process(name, proc.pid)
                outcome = self._wait(proc, log_path)
                if cancel.is_set() and not outcome.succeeded:
                    return _cancelled(log_path, outcome.exit_code)
                self._blame_the_disk(outcome)
                return outcome
            finally:
                forget()
                with self._running_lock:
                    self._running.pop(proc.pid, None)
        finally:
            with self._running_lock:
                self._free_slots.append((slot, slot_fd))

    def _blame_the_disk(self, outcome: Outcome) -> None:
        """A worker that failed while the state directory is full or read-only most likely
        failed to write its log there: a `StorageFault` (the manager holds and the attempt
        does not count), not the item's failure."""
        if outcome.succeeded or outcome.cancelled or outcome.interrupted:
            return
        kind = diagnose(self.state_dir)
        if kind is not None:
            raise StorageFault(kind, self.state_dir, "a worker failed while its log could not grow")

    def _record_process(self, name: str, pgid: int) -> None:
        """Tell the ledger the child's process group. A fault of the disk here does not stop
        the child (it runs and its outcome is reported as usual); only a manager killed while
        it runs could then not end it at the next start."""
        if self.record_process is None:
            return
        try:
            self.record_process(name, pgid, started_now())
        except StorageFault as fault:
            log.warning("%s: its process group is not recorded: %s", name, fault.short)

    def _take_slot(self) -> tuple[int, int]:
        """A free item-file slot and its open descriptor (made when all are in use)."""
        with self._running_lock:
            if self._free_slots:
                return self._free_slots.pop()
            slot = next(self._slots)
        path = os.path.join(self.items_dir, f"item-{slot}.json")
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        return slot, os.open(path, flags, 0o600)

    def _wait(self, proc: Child, log_path: str) -> Outcome:
        code = proc.wait(self.timeout)
        if code is None:
            proc.end(KILL_AFTER_TERM_SECONDS)
            proc.wait()
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
            threading.Thread(target=proc.end, args=(KILL_AFTER_TERM_SECONDS,), daemon=True).start()


def _cancelled(log_path: str, code: int | None = None) -> Outcome:
    return Outcome(
        False, exit_code=code, error="cancelled: it left the source", log_path=log_path,
        cancelled=True,
    )  # fmt: skip
