"""The local backend (the embedded default): a child process per item, a SQLite ledger.

    process.py  runs one item: WORK_ITEM_FILE, its own process group, a log per item
    ledger.py   the record of every item under the state directory, and its recovery

This face is what the registry (`manager.backends`) hands the rest of the manager: the typed
options (`LocalOptions`, and `LocalQueue` naming a state directory for `status` and `retry`),
`setup()` to set up a manager's ledger and runner - recovering what a manager that died left
running - and `status()` / `retry()` for the commands that read or change the record.
"""

from __future__ import annotations

import fnmatch
import json
import logging
import os
import shutil
import socket
import time
from dataclasses import dataclass

from ...declared import option, split_words
from ...durations import moment, parse_duration
from ...errors import UserError
from ...faults import StorageFault, diagnose
from ...log_tails import log_tail
from ...ports import Parts, QueueRecord, State
from . import integrity
from .ledger import LEDGER_FILE, MANAGER_FILE, Ledger, LedgerBusy, read_paused, write_paused
from .process import LocalBackend, end_process_group

DEFAULT_STATE_DIR = ".workqueue"
log = logging.getLogger(__name__)


def worker_argv(words: list[str]) -> list[str]:
    """The worker command as argv, checked: its program exists and can be run."""
    if not words:
        raise UserError("no worker command given")
    exe = words[0]
    if os.sep in exe:
        if not (os.path.isfile(exe) and os.access(exe, os.X_OK)):
            raise UserError(f"worker command is not an executable file: {exe}")
    elif shutil.which(exe) is None:
        raise UserError(f"worker command not found on PATH: {exe}")
    return words


def _state_dir():
    return option(
        "--state-dir", f"ledger and logs (default {DEFAULT_STATE_DIR})", default=DEFAULT_STATE_DIR
    )


@dataclass(frozen=True)
class LocalQueue:
    """Where a local queue's record lives."""

    state_dir: str = _state_dir()


@dataclass(frozen=True)
class LocalOptions:
    state_dir: str = _state_dir()
    worker_argv: list[str] = option(
        "--worker-cmd",
        'the worker command, e.g. "thumbnail --size 320" (split like a shell, run without one)',
        parse=lambda text: worker_argv(split_words(text)),
    )
    timeout: float | None = option(
        "--timeout", "kill a worker (its whole process group) after this long", parse=parse_duration
    )

    @property
    def where(self) -> LocalQueue:
        return LocalQueue(self.state_dir)


def open_ledger(state_dir: str, *, exclusive: bool = True, backups: bool | None = None) -> Ledger:
    """The ledger of `state_dir`, opened; a held or unusable directory is a `UserError`."""
    try:
        return Ledger(state_dir).open(exclusive=exclusive, backups=backups)
    except OSError as exc:
        raise UserError(f"cannot use state directory {state_dir}: {exc.strerror}") from None


def _existing_ledger(state_dir: str, *, exclusive: bool = False) -> Ledger:
    """For commands that read or change what a manager left (never backed up by them): a
    clear error when nothing is there."""
    if not os.path.exists(os.path.join(state_dir, LEDGER_FILE)):
        raise UserError(f"no ledger in {state_dir} (has a manager run there?)")
    return open_ledger(state_dir, exclusive=exclusive, backups=False)


def setup(options: LocalOptions, *, registry=None) -> Parts:
    """The ledger (exclusively: one manager per state directory) and the process runner.
    Items a manager that died left running are ended and put back to pending first."""
    if not options.worker_argv:
        raise UserError("--worker-cmd is required with --backend local")
    ledger = open_ledger(options.state_dir)
    recovered = ledger.recover(end_process_group)
    if recovered:
        log.warning(
            "%d item(s) were running when the last manager stopped; they run again",
            len(recovered),
        )
    backend = LocalBackend(
        options.worker_argv,
        ledger.state_dir,
        timeout=options.timeout,
        record_process=ledger.record_process,
    )
    return Parts(ledger=ledger, backend=backend, close=ledger.close)


def rows_for(state_dir: str):
    """Every row of the ledger in `state_dir` (for measuring a finished run)."""
    with _existing_ledger(state_dir) as ledger:
        return ledger.rows()


def running_manager(state_dir: str) -> dict | None:
    """The facts the manager running on `state_dir` left (`Ledger.note_manager`), or None
    when none runs there: no file, or its process is gone (killed before it could clean up)."""
    try:
        with open(os.path.join(state_dir, MANAGER_FILE), encoding="utf-8") as f:
            facts = json.load(f)
        pid = int(facts["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if facts.get("host") != socket.gethostname():
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass  # alive, someone else's
    return facts


def status(queue: LocalQueue, *, listed: list[str] | None = None) -> QueueRecord:
    """The queue as its ledger has it, and the facts of the manager running on it now (the
    ledger names every item it has seen: `listed` adds nothing here)."""
    with _existing_ledger(queue.state_dir) as ledger:
        rows = ledger.rows()
        where = ledger.where
    facts = running_manager(queue.state_dir)
    return QueueRecord(
        where,
        rows,
        facts,
        paused_since=read_paused(queue.state_dir),
        held=_held(facts, where),
        work_outlives_manager=False,  # a worker is a child of its manager: it stops with it
    )


def _held(facts: dict | None, state_dir: str) -> str | None:
    """Why the running manager holds dispatch: what it said (`Manager.facts`), or - when the
    disk refuses even that note - what the state directory's file system says of itself."""
    if not facts:
        return None
    if facts.get("held"):
        return str(facts["held"])
    kind = diagnose(state_dir)
    if kind is None:
        return None
    return StorageFault(kind, state_dir).describe(
        lost="nothing is lost", then="the manager carries on by itself"
    )


def item_detail(queue: LocalQueue, name: str, record: QueueRecord, lines: int = 20) -> dict:
    """What `workqueue status NAME` adds for one item: the tail of its log, and the versions
    it ran at (earlier runs, then the latest), oldest first."""
    row = next((r for r in record.rows if r.name == name), None)
    with _existing_ledger(queue.state_dir) as ledger:
        versions = ledger.history(name)
    if row is not None and row.version is not None:
        versions.append(
            {
                "version": row.version,
                "state": row.state,
                "attempts": row.attempts,
                "finished": row.finished,
            }
        )
    tail = log_tail(row.log_path, lines) if row is not None and row.log_path else None
    return {"log_tail": tail, "versions": versions}


def _ledger_to_change(state_dir: str) -> tuple[Ledger, bool]:
    """The ledger, held exclusively when no manager runs on it; else shared, and True: the
    change must then be left as a request the running manager takes (`request_retry`)."""
    try:
        return _existing_ledger(state_dir, exclusive=True), False
    except LedgerBusy:
        return _existing_ledger(state_dir), True


def retry(queue: LocalQueue, name: str) -> str:
    """Make a failed (or cancelled) item pending again; with a manager running on the state
    directory, leave it a request it takes at its next poll. Returns what happened, for
    people."""
    ledger, busy = _ledger_to_change(queue.state_dir)
    with ledger:
        current = ledger.state(name)
        if current is None:
            raise UserError(f"no item named {name!r} in {ledger.where}")
        if current[0] not in (State.FAILED, State.CANCELLED):
            raise UserError(f"{name!r} is {current[0]}, not failed: nothing to retry")
        if busy:
            ledger.request_retry(name)
            return f"{name}: the running manager will run it again"
        ledger.retry(name)
        return f"{name}: pending again; the next manager run will run it"


def pause(queue: LocalQueue) -> str:
    """Hold the queue: running work finishes, nothing new starts, until `resume`."""
    with _existing_ledger(queue.state_dir) as ledger:
        where = ledger.where
    since = read_paused(queue.state_dir)
    if since is not None:
        return f"{where}: already paused since {moment(since, date=True)}"
    write_paused(queue.state_dir, time.time())
    return f"{where}: paused; running work finishes, nothing new starts (workqueue resume)"


def resume(queue: LocalQueue) -> str:
    with _existing_ledger(queue.state_dir) as ledger:
        where = ledger.where
    since = read_paused(queue.state_dir)
    if since is None:
        return f"{where}: not paused"
    write_paused(queue.state_dir, None)
    return f"{where}: resumed (paused since {moment(since, date=True)})"


def retry_many(
    queue: LocalQueue, *, matching: str | None = None, listed: list[str] | None = None
) -> list[str]:
    """Every failed item (or those whose name matches the glob `matching`) made pending again,
    or left as requests for the running manager. Returns their names."""
    ledger, busy = _ledger_to_change(queue.state_dir)
    with ledger:
        names = [
            r.name
            for r in ledger.rows(State.FAILED)
            if matching is None or fnmatch.fnmatchcase(r.name, matching)
        ]
        for name in names:
            if busy:
                ledger.request_retry(name)
            else:
                ledger.retry(name)
    return names


Options = LocalOptions
Queue = LocalQueue


# -- the ledger's own care: `workqueue ledger check|backup|restore` -------------------------


def check_ledger(state_dir: str) -> str:
    """Run the open-time checks; a line for people, or `LedgerDamaged`."""
    with _existing_ledger(state_dir) as ledger:
        items = len(ledger)
        mode, sync = ledger.durability()
    kept = integrity.backups(ledger.state_dir)
    newest = f", newest {os.path.basename(kept[0])}" if kept else ""
    return (
        f"ledger {ledger.path}: sound, {items} items, schema {integrity.SCHEMA_VERSION}, "
        f"journal {mode}, synchronous {'NORMAL' if sync == 1 else sync}; "
        f"{len(kept)} backup(s){newest}"
    )


def backup_ledger(state_dir: str) -> str:
    """A backup now (a manager may be running: SQLite's online backup is consistent)."""
    with _existing_ledger(state_dir) as ledger:
        return f"backed up {ledger.path} to {ledger.backup()}"


def restore_ledger(state_dir: str, source: str | None = None) -> str:
    """Put the newest sound backup (or `source`) in place; refused while a manager runs."""
    if not os.path.isdir(state_dir):
        raise UserError(f"no state directory {state_dir}")
    ledger = Ledger(state_dir)
    ledger.lock()
    try:
        used, kept = integrity.restore(ledger.path, ledger.state_dir, source)
    finally:
        ledger.unlock()
    with _existing_ledger(state_dir) as restored:
        counts = restored.counts()
    aside = f"; the old ledger is kept as {kept}" if kept else ""
    done = ", ".join(f"{n} {state}" for state, n in counts.items())
    return f"restored {restored.path} from {used} ({done}){aside}"
