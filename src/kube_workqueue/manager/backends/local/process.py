"""The local backend's runner: one child process per item, on this machine.

The worker contract (Burns' work-queue worker interface): the item's `data` is written as JSON
to a private file (mode 0600, in the state directory) named by `WORK_ITEM_FILE`; the command -
split like a shell would split it, but never run through a shell - gets it in its environment,
with the manager's own environment passed through. Children are started by `spawn.py`
(posix_spawn, the program looked up once) - the cheapest start Python has. Exit 0 means
succeeded. The item never reaches argv or a shell string, so quotes, `$(…)`, spaces and unicode
in names are just data.

Each worker runs in its own process group (a new session), so `--timeout` and shut-down end the
whole group - the command and anything it started - and so does the worker's own exit: whatever
it left running in its group is ended when it exits (SIGTERM, then SIGKILL), success or not. A
worker that wants a daemon to outlive it must detach it on purpose (its own session). stdout and
stderr are appended to one log file per item under `logs/`, each attempt under a header line.

Workers are not this process's children but its keeper's (`keeper.py`, through `kept.py`): a
small process of its own that starts them, reaps them and journals each start and end, so that
a worker that ends while no manager runs - the manager killed with -9, its process group
killed, its terminal closed - still has its outcome recorded by the next manager, and a worker
still running then is adopted (`recovery.py`), never started again. One message to the keeper
per start and one back per end are what this costs on the dispatch path.

A run's `Cancel` (`manager.ports.Cancel`: the item left the source) ends the item's process
group the same way - at once if it runs, as soon as it is started if the cancel came first -
and the run reports the outcome as cancelled; set before anything started, nothing starts.
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
from dataclasses import replace
from typing import Any

from ...faults import IO_ERROR, StorageFault, classify, diagnose, raised_as_faults
from ...ports import Cancel, Outcome
from .kept import LOST, KeeperKilled, KeeperLink, KeptChild
from .spawn import Spawner

KEEPERS_DIR = "keepers"  # the keepers' sockets, locks and journals, under the state directory

KILL_AFTER_TERM_SECONDS = 5.0
KEEPER_TRIES = 3  # keepers started, one after another killed as it starts, before giving up
log = logging.getLogger(__name__)


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


@functools.lru_cache(maxsize=4096)  # asked twice per dispatch (reconciler and run)
def log_file_name(name: str) -> str:
    """A safe, readable, unique file name for an item's log."""
    slug = _UNSAFE.sub("_", name)[-80:].strip("._") or "item"
    digest = hashlib.sha256(name.encode("utf-8", "surrogateescape")).hexdigest()[:10]
    return f"{slug}-{digest}.log"


class LocalBackend:
    work_outlives_manager = False  # on a shared ledger its workers end with it

    def __init__(
        self,
        argv: list[str],
        state_dir: str,
        *,
        timeout: float | None = None,
        env: dict[str, str] | None = None,
        end_with_manager: bool = False,
        credentials: frozenset[str] = frozenset(),
        passed: tuple[str, ...] = (),
    ) -> None:
        """`end_with_manager`: the workers end when this manager dies (a shared ledger: its
        claims run out and the items run elsewhere), instead of waiting for the next one.
        `credentials`: the variables no worker inherits (the sources' and cloud clients'),
        but for `passed` (`--worker-env`): see `spawn.worker_environment`."""
        if not argv:
            raise ValueError("the worker command is empty")
        self.argv = argv
        self.timeout = timeout
        self.env = env
        self.end_with_manager = end_with_manager
        self.credentials, self.passed = credentials, passed
        self._spawner: Spawner | None = None  # made at the first run: a missing program fails
        self._link: KeeperLink | None = None  # this manager's keeper, started at the first run
        self._free_slots: list[tuple[int, int]] = []  # item-file slots not in use, open
        self._slots = itertools.count()  # that item, not the manager's start
        self.state_dir = state_dir
        self.items_dir = os.path.join(state_dir, "items")
        self.logs_dir = os.path.join(state_dir, "logs")
        self.keepers_dir = os.path.join(state_dir, KEEPERS_DIR)
        os.makedirs(self.items_dir, mode=0o700, exist_ok=True)
        os.makedirs(self.logs_dir, exist_ok=True)
        # Invariant (under _running_lock): the workers started (or adopted) whose end this
        # manager has not yet seen, by (name, attempt); `_adopted` those of a manager that
        # died, not yet waited for by a `run`; `_unrecorded` the ended ones whose end the
        # ledger does not have yet (acknowledged to their keeper once it does).
        self._running: dict[tuple[str, int], KeptChild] = {}
        self._adopted: dict[tuple[str, int], KeptChild] = {}
        self._adopted_links: list[KeeperLink] = []
        self._unrecorded: dict[str, KeptChild] = {}
        self._running_lock = threading.Lock()
        self._stopping = threading.Event()
        self._past_grace = False  # `shutdown` has ended (or let finish) all it saw running

    def log_path(self, name: str) -> str:
        return os.path.join(self.logs_dir, log_file_name(name))

    def others_running(self) -> int:
        return 0  # every worker of this state directory is this manager's own, or adopted

    def on_change(self, callback: Callable[[], None]) -> None:
        return None  # nothing runs here that the manager did not start or adopt

    def cancel_elsewhere(self, name: str) -> bool:
        """Nothing of this state directory runs outside its manager (what a manager that died
        left running, this one adopted): nothing to end."""
        return False

    # -- what a manager that died left -----------------------------------------------------

    def adopt(self, children: dict[tuple[str, int], KeptChild], links: list[KeeperLink],
              orphans: dict[tuple[str, int], dict] | None = None) -> None:  # fmt: skip
        """Workers a manager that died left running (`recovery.take_back`): the manager waits
        for each with `run(name, …, attempt, …)` instead of starting it again - those of live
        keepers through their links, `orphans` (a dead keeper's workers whose shims still run:
        their start records) through this manager's own keeper, which watches their shims."""
        for link in links:
            link.on_orphans = self._watch_orphans
        with self._running_lock:
            self._adopted.update(children)
            self._adopted_links.extend(links)
        if orphans:
            link = self._keeper()
            for key, record in orphans.items():
                child = KeptChild(link, 0, record.get("began"))
                link.watch(child, record)
                with self._running_lock:
                    self._adopted[key] = child

    def _watch_orphans(self, orphans: list[tuple[KeptChild, dict]]) -> None:
        """A keeper died under this manager: its workers' shims are watched by the next one
        (`KeeperLink.on_orphans`); whoever waits for them hears their ends from there."""
        try:
            link = self._keeper()
        except OSError as exc:
            for child, _ in orphans:
                child._end({"code": None, "error": f"{LOST} (no keeper to watch it: {exc})"})
            return
        for child, record in orphans:
            link.watch(child, record)

    adopted_needs_data = False  # a keeper's worker has its item file already

    def adopted(self) -> list[tuple[str, int]]:
        """(name, attempt) of every adopted worker not yet waited for."""
        with self._running_lock:
            return list(self._adopted)

    def recorded(self, name: str) -> None:
        """The ledger has `name`'s end (its commit calls this): its keeper may forget it, and
        an adopted keeper with nothing left of ours is let go."""
        with self._running_lock:
            child = self._unrecorded.pop(name, None)
        if child is None:
            return
        child.link.ack(child.id)
        if child.link is not self._link and child.link.running == 0:
            with self._running_lock:
                if any(c.link is child.link for c in self._adopted.values()):
                    return
                if child.link in self._adopted_links:
                    self._adopted_links.remove(child.link)
            child.link.close(wait=0)

    # -- one item --------------------------------------------------------------------------

    def run(self, name: str, data: dict[str, Any], attempt: int, cancel: Cancel) -> Outcome:
        log_path = self.log_path(name)
        with self._running_lock:
            child = self._adopted.pop((name, attempt), None)
        if child is not None:
            return self._follow(name, attempt, child, cancel, log_path)
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
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
            header = f"=== workqueue: {name} attempt {attempt} at {stamp} ===\n"
            try:
                link = self._keeper()
            except OSError as exc:
                return Outcome(
                    False,
                    error=f"cannot start worker: {exc.strerror}: {self.argv[0]}",
                    log_path=log_path,
                )
            child = link.spawn(name, attempt, log_path, header, {"WORK_ITEM_FILE": item_file})
            return self._follow(name, attempt, child, cancel, log_path)
        finally:
            with self._running_lock:
                self._free_slots.append((slot, slot_fd))

    def _keeper(self) -> KeeperLink:
        """This manager's keeper: started at the first run, and again if it died. One killed
        as it started is started again (up to KEEPER_TRIES): a stray kill is not the item's
        failure, nor the end of the workers a dead keeper's successor must watch; a keeper
        that cannot start at all is an `OSError` at once."""
        with self._running_lock:
            if self._link is not None and self._link.alive:
                return self._link
            if self._spawner is None:
                # (a manager whose workers end with it is one of a fleet: a shared ledger)
                self._spawner = Spawner(self.argv, self.env, credentials=self.credentials,
                                        passed=self.passed,
                                        shared_ledger=self.end_with_manager)  # fmt: skip
            for tries_left in range(KEEPER_TRIES - 1, -1, -1):
                try:
                    self._link = KeeperLink.start(
                        self.keepers_dir, self._spawner, end_with_manager=self.end_with_manager
                    )
                    break
                except KeeperKilled:
                    if not tries_left:
                        raise
                    log.warning("the workers' keeper was killed as it started: starting another")
            self._link.on_orphans = self._watch_orphans
            return self._link

    def _follow(self, name: str, attempt: int, child: KeptChild, cancel: Cancel,
                log_path: str) -> Outcome:  # fmt: skip
        """Wait for a started (or adopted) worker's end; its outcome."""
        with self._running_lock:
            self._running[(name, attempt)] = child
            late = self._past_grace  # started after `shutdown` had looked: ended at once
        if late:
            _end_aside(child)
        # Ended off the canceller's thread: the poller that noticed the removal must not
        # wait for a worker's grace period (and at once if the cancel came first).
        forget = cancel.on_set(lambda: _end_aside(child))
        try:
            outcome = self._wait(child, log_path)
            if child.began is not None and child.ended is not None:  # the keeper's own clock
                outcome = replace(outcome, seconds=max(0.0, child.ended - child.began))
            if child.returncode is not None or child.error == LOST or child.interrupted:
                # its keeper keeps the end until the ledger has it - an interrupted one too
                # (put back in line): unacknowledged, it would outlive the item's next start
                with self._running_lock:
                    self._unrecorded[name] = child
            if cancel.is_set() and not outcome.succeeded:
                return _cancelled(log_path, outcome.exit_code)
            self._blame_the_disk(outcome)
            return outcome
        finally:
            forget()
            with self._running_lock:
                self._running.pop((name, attempt), None)

    def _blame_the_disk(self, outcome: Outcome) -> None:
        """A worker that failed while the state directory is full or read-only most likely
        failed to write its log there: a `StorageFault` (the manager holds and the attempt
        does not count), not the item's failure."""
        if outcome.succeeded or outcome.cancelled or outcome.interrupted:
            return
        kind = diagnose(self.state_dir)
        if kind is not None:
            raise StorageFault(kind, self.state_dir, "a worker failed while its log could not grow")

    def _take_slot(self) -> tuple[int, int]:
        """A free item-file slot and its open descriptor (made when all are in use)."""
        with self._running_lock:
            if self._free_slots:
                return self._free_slots.pop()
            slot = next(self._slots)
        path = os.path.join(self.items_dir, f"item-{slot}.json")
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        return slot, os.open(path, flags, 0o600)

    def _wait(self, child: KeptChild, log_path: str) -> Outcome:
        if not child.exited_within(self.timeout if self.timeout is not None else 1e9):
            child.end(KILL_AFTER_TERM_SECONDS)
            child.wait()
            return Outcome(
                False, exit_code=None, error=f"timed out after {self.timeout:g}s", log_path=log_path
            )
        code = child.returncode
        if child.refused is not None and child.refused[0] == "log":  # the disk, not the item
            errno_, why = child.refused[1], child.error or "cannot write the log"
            fault = classify(OSError(errno_ or 0, why), self.state_dir)
            raise fault or StorageFault(IO_ERROR, self.state_dir, why)
        if child.interrupted:  # its shim ended it with the manager that started it
            return Outcome(False, exit_code=code, interrupted=True, log_path=log_path)
        if code is None:  # never started, or its end was lost with its keeper
            return Outcome(False, error=child.error, log_path=log_path)
        if self._stopping.is_set() and code != 0:
            return Outcome(False, exit_code=code, interrupted=True, log_path=log_path)
        if code == 0:
            return Outcome(True, exit_code=0, log_path=log_path)
        return Outcome(False, exit_code=code, error=exit_error(code), log_path=log_path)

    def shutdown(self, grace: float) -> None:
        """Stop: start nothing new; let running workers (adopted ones too) finish for `grace`
        seconds, then end their process groups. Their `run()` calls then report
        `interrupted`."""
        self._stopping.set()
        deadline = time.monotonic() + grace
        left: list[KeptChild] = []
        while True:
            with self._running_lock:
                if not self._running or time.monotonic() >= deadline:
                    left = list(self._running.values())
                    # a worker a run() began to start before it saw `_stopping` is ended by
                    # that run (`_follow`): nothing started after this waits forever
                    self._past_grace = True
                    break
            time.sleep(0.05)
        for child in left:
            _end_aside(child)

    def close(self) -> None:
        """After `shutdown` and the last `run`: the keepers are told goodbye; this manager's
        own is waited for (it leaves once its workers have ended)."""
        with self._running_lock:
            links = [link for link in (self._link, *self._adopted_links) if link is not None]
            self._link, self._adopted_links = None, []
        for link in links:
            link.close(wait=KILL_AFTER_TERM_SECONDS + 5 if link.process else 0)


def exit_error(code: int | None) -> str | None:
    """What an exit code says, for the ledger: None for success."""
    if code == 0:
        return None
    if code is None:
        return "its end is unknown"
    if code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def _cancelled(log_path: str, code: int | None = None) -> Outcome:
    return Outcome(
        False, exit_code=code, error="cancelled: it left the source", log_path=log_path,
        cancelled=True,
    )  # fmt: skip


def _end_aside(child: KeptChild) -> None:
    """End a worker's process group (TERM, then KILL after KILL_AFTER_TERM_SECONDS) from a
    thread of its own: the caller does not wait out the worker's grace."""
    threading.Thread(target=child.end, args=(KILL_AFTER_TERM_SECONDS,), daemon=True).start()
