"""The local backend (the embedded default): a child process per item, a SQLite ledger.

    process.py     runs one item: WORK_ITEM_FILE, its own process group, a log per item
    keeper.py      the workers' parent, a process of its own: their ends outlive the manager
    keeper_shims.py  the keeper's side of its slots' shims: forked, heard, watched, their
                   deaths settled
    kept.py        the manager's side of a keeper (`KeeperLink`): started or adopted, its
                   workers asked for, their ends heard
    kept_child.py  one worker through it (`KeptChild`), with the face of a child process
    keeper_protocol.py  what a manager and its keeper say, and the keeper's journal: typed
                   records in one place
    recovery.py    what a manager that died left: adopted, recorded, or back in line
    spawn.py       the worker's program found and its environment made once (`Spawner`)
    shim.py        a shim per slot: each worker's parent, which writes its end beside it, so
                   the end outlives the keeper too
    ledger.py      `SqliteLedger`: the record of every item under the state directory, and
                   its recovery
    statements.py  every statement the SQLite ledger sends, named (hot ones' plans checked)
    ledger_file.py the ledger's file: its schema, checked connections, the directory's lock
    state_files.py the pause file and the running manager's facts beside the ledger
    integrity.py   the ledger checks itself at every open, and its backups
    sqlite_faults.py
                   SQLite's errors as faults of the machine (full, read-only, failing disk)
    queue_commands.py
                   `status`, `retry`, `pause`, `resume` on the ledger (`LocalQueueOps`)
    care.py        `workqueue ledger check | backup | restore`
    fleet.py       the runner of a manager on a shared ledger (`--ledger postgresql://…`,
                   `manager.fleet`): workers that end with their manager, an id that
                   outlives its restarts

This face is what the registry (`manager.backends`) hands the rest of the manager: the typed
options (`LocalOptions`, and `LocalQueue` naming a state directory for `status` and `retry`),
`setup()` to set up a manager's ledger and runner, `fleet_runner()` for the runner alone when
the assembly brings a shared ledger - both settle what a manager that died left running with
one start hook (`settle_at_start`) - and `queue_ops()` for the commands that read or change
the record.
"""

from __future__ import annotations

import logging
import os
import shutil
from dataclasses import dataclass

from ...declared import option, split_words
from ...durations import parse_duration
from ...errors import UserError
from ...fleet.options import (
    drain_option,
    lease_option,
    ledger_option,
    needs_from_data_option,
    needs_option,
    offers_option,
    prefers_option,
    spill_after_option,
)
from ...items import QueueRecord
from ...setup_parts import ManagerSeeds, Parts

# The ledger, the runner and the queue commands are imported where they are used: every
# `workqueue` command declares this backend's flags, and only some open a ledger (sqlite3,
# the keeper's client, ... - 40 ms of a command's start otherwise).

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


def state_dir_path(text: str) -> str:
    """A state directory's path: not empty (an empty one would be the current folder, never
    meant)."""
    if not text.strip():
        raise UserError("empty: give a folder (default .workqueue)")
    return text


def _state_dir():
    return option(
        "--state-dir",
        f"ledger and logs (default {DEFAULT_STATE_DIR})",
        default=DEFAULT_STATE_DIR,
        parse=state_dir_path,
    )


@dataclass(frozen=True)
class LocalQueue:
    """Where a local queue's record lives: the state directory's ledger, or a shared one."""

    state_dir: str = _state_dir()
    ledger: str | None = ledger_option()


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
    ledger: str | None = ledger_option()
    lease: float = lease_option()
    drain: bool | None = drain_option()
    offers: list = offers_option()
    needs: list = needs_option()
    needs_from_data: bool = needs_from_data_option()
    prefers: object = prefers_option()
    spill_after: float = spill_after_option()
    worker_env: list = option(
        "--worker-env",
        "pass this variable on to the workers (repeatable): the credentials the queue's own "
        "parts read (a source's password, a cloud client's key, libpq's on a shared ledger) "
        "are withheld from them otherwise",
        repeat=True,
        metavar="NAME",
        parse=lambda words: [_passed(word) for word in words],
    )

    @property
    def where(self) -> LocalQueue:
        return LocalQueue(self.state_dir, self.ledger)


def setup(options: LocalOptions, seeds: ManagerSeeds) -> Parts:
    """The state directory's ledger (exclusively: one manager per directory) and the process
    runner, what a manager that died left settled first (`settle_at_start`)."""
    from .ledger import open_ledger
    from .process import LocalBackend

    _check(options)
    ledger = open_ledger(options.state_dir)
    backend = LocalBackend(options.worker_argv, ledger.state_dir, timeout=options.timeout,
                           credentials=seeds.credentials,
                           passed=tuple(options.worker_env))  # fmt: skip
    try:
        settle_at_start(backend, ledger.state_dir)(ledger)
    except BaseException:
        ledger.close()
        raise

    def close() -> None:
        try:
            backend.close()
        finally:
            ledger.close()

    return Parts(ledger=ledger, backend=backend, close=close)


def fleet_runner(options: LocalOptions, seeds: ManagerSeeds):
    """The runner of a manager on a shared ledger (`manager.fleet.joining`): see `fleet.py`."""
    from .fleet import fleet_runner as runner

    _check(options)
    return runner(options, settle_at_start, seeds.credentials)


def settle_at_start(backend, state_dir: str):
    """The start hook, whichever the ledger: what the ledger says ran in `state_dir` when its
    manager stopped is taken back (`recovery.take_back`) - workers still running adopted, ends
    that came meanwhile recorded, the rest put back in line - and every later end of `backend`
    is recorded."""
    from .recovery import take_back

    def settle(ledger) -> None:
        ledger.on_recorded = backend.recorded
        taken = take_back(ledger, state_dir)
        taken.say()
        backend.adopt(taken.adopted, taken.links, taken.orphans)

    return settle


def _passed(word: str) -> str:
    from .spawn import passed_variable

    return passed_variable(word)


def _check(options: LocalOptions) -> None:
    if not options.worker_argv:
        raise UserError("--worker-cmd is required with --backend local")
    for name in options.worker_env:
        if name not in os.environ:
            raise UserError(f"--worker-env {name}: {name} is not set in this environment")


def queue_ops(queue: LocalQueue):
    """What `status`, `retry`, `pause` and `resume` do to the queue (a context manager:
    `queue_commands.LocalQueueOps`)."""
    if queue.ledger:
        from ...fleet.queue_commands import FleetQueueOps

        return FleetQueueOps(queue.ledger)
    from .queue_commands import LocalQueueOps

    return LocalQueueOps(queue.state_dir)


def measured_record(queue: LocalQueue) -> QueueRecord:
    """Every row of the ledger in the queue's state directory: what `stability`, `simulate`
    and `plan` measure with `--from-state` (first seen is when an item arrived)."""
    if queue.ledger:
        with queue_ops(queue) as ops:
            return ops.status()
    from .ledger import existing_ledger

    with existing_ledger(queue.state_dir) as ledger:
        return QueueRecord(ledger.where, ledger.rows())


Options = LocalOptions
Queue = LocalQueue
