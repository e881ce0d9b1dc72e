"""What a manager that died left behind, taken back when the next one starts.

The ledger says which items were running; the keepers (`keeper.py`) of the managers that died
say what became of their workers. Each running item is settled by the newest word on its
attempt - (name, attempt number), the latest record by start time when several keepers speak
of it:

    its worker still runs under a live keeper   adopted: the keeper is asked for its end, which
                                                 the new manager waits for and records as if it
                                                 had started it (`status` shows it running)
    its worker ended while no manager ran       its outcome is recorded now (exit code, times),
                                                 attempt counted - it never runs twice
    its keeper died, its shim still runs it     watched by this manager's keeper (`watch`): its
                                                 end, when it comes, is the worker's own
    its keeper died, and its shim said how      its outcome as the shim wrote it (`shim.py`)
    it ended
    its keeper and its shim gone without a      back in line, the attempt not counted: whatever
    word (a machine restart, a hand)            ended it was not the item's doing
    no keeper ever started it                   back in line, the attempt not counted (the
                                                 manager died between the record and the start)

(A keeper of an older version started its workers without a shim: such a worker whose keeper
died is ended, and its attempt recorded failed - its end is lost.)

So attempts in the ledger are worker starts, and only a worker that never finished - its
keeper killed with it, or the machine gone - runs again. A ledger of an earlier version knows
a running item's process group instead (pgid and start time): that group is ended and the item
put back, as before.

A live keeper is asked, not read: it answers with the workers it still runs and the ends it
holds unrecorded, exactly. A dead keeper's journal is read (starts, ends, acknowledgements) and
its files removed once every outcome it held is in the ledger.
"""

from __future__ import annotations

import fcntl
import logging
import os
import time
from dataclasses import dataclass, field

from ...errors import UserError
from ...ports import ClaimLost
from . import shim
from .keeper_protocol import read_journal
from .kept import LOST, KeeperLink, KeptChild, end_process_group
from .process import KEEPERS_DIR, exit_error

log = logging.getLogger(__name__)

LEAVING_SECONDS = 30.0  # the longest a keeper may hold its lock with its socket gone


RANK = {"ended": 4, "running": 3, "shim": 2, "vanished": 1, "orphaned": 1}


@dataclass
class Word:
    """The best word on one attempt: its worker `running` (a child of a live keeper),
    `ended` (a keeper's end record, or its shim's file), `shim` (a dead keeper's worker whose
    shim still runs), `vanished` (a dead keeper's worker whose shim is gone without a word) or
    `orphaned` (a dead keeper's worker started without a shim)."""

    kind: str
    record: dict
    child: KeptChild | None = None
    link: KeeperLink | None = None  # the live keeper that holds an end unrecorded


@dataclass
class Survey:
    words: dict[tuple[str, int], Word] = field(default_factory=dict)
    links: list[KeeperLink] = field(default_factory=list)  # live keepers, adopted
    dead: list[tuple[str, int]] = field(default_factory=list)  # (keeper id, its locked fd)

    def hear(self, kind: str, record: dict, child: KeptChild | None = None,
             link: KeeperLink | None = None) -> None:  # fmt: skip
        """Keep the word on the newest start of the attempt, and of that start the most
        telling - an end over a worker running, a running worker over a dead keeper's start (a
        keeper that watched a dead one's shim journals the same start again, its start time
        and all). An attempt put back in line uncounted is started again under the same
        number: a word on its earlier start (an interrupted end, say) must not outrank the
        worker running now - taken for it, the item ran twice (4 of 200 in the drive). Starts
        are ordered by the moment of the start on the clock since boot (a clock that never
        steps: `boot`; a keeper of the release before gave its shim's start in clock ticks),
        then by wall-clock time."""
        key = (record["name"], record["attempt"])
        known = self.words.get(key)
        if known is None or _order(known.kind, known.record) <= _order(kind, record):
            self.words[key] = Word(kind, record, child, link)


def _order(kind: str, record: dict) -> tuple:
    """Where a word stands among those on one attempt (`Survey.hear`): newest start first."""
    at = record.get("boot")
    if not isinstance(at, int | float):  # (a shim per worker: its start, in clock ticks)
        try:
            at = int(record.get("ticks") or 0) / shim.CLOCK_TICKS
        except ValueError:
            at = 0.0
    return at, record.get("began") or 0, RANK[kind]


def survey(keepers_dir: str) -> Survey:
    """Every keeper's word: live ones adopted (connected, asked), dead ones' journals read."""
    found = Survey()
    try:
        names = sorted(os.listdir(keepers_dir))
    except FileNotFoundError:
        return found
    for entry in names:
        if entry.endswith(".lock"):
            _hear_keeper(found, keepers_dir, entry[: -len(".lock")])
    return found


def _hear_keeper(found: Survey, keepers_dir: str, keeper_id: str) -> None:
    """One keeper's word: asked while it lives, its journal read once it is gone.

    A keeper that leaves (no worker, no manager) removes its socket, then lets go of its lock
    by exiting: between the two it is neither askable nor readable. Its journal may hold ends
    no manager recorded (the workers ended while none ran), so it is waited for - until it
    lets go, then read - never passed over: a keeper passed over made its items look never
    started, and they ran again (seen under load: 4 items twice in the random-kill drive)."""
    try:
        fd = os.open(os.path.join(keepers_dir, keeper_id + ".lock"), os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:  # it left meanwhile with everything recorded: files and all
        return
    deadline = time.monotonic() + LEAVING_SECONDS
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break  # gone: its journal says the rest
        except BlockingIOError:  # alive: adopt it
            if _adopt(found, keepers_dir, keeper_id):
                os.close(fd)
                return
        if time.monotonic() > deadline:
            os.close(fd)
            raise UserError(f"the workers' keeper {keeper_id} neither answers nor leaves (its "
                            f"lock is held, its socket gone) in {keepers_dir}: end it, or "
                            "wait, and start again")  # fmt: skip
        time.sleep(0.02)  # leaving: it lets go of the lock as it exits
    starts, ends = read_journal(os.path.join(keepers_dir, keeper_id + ".journal"))
    log.debug("keeper %s: gone; its journal holds %d start(s), %d end(s) unrecorded", keeper_id,
              len(starts), len(ends))  # fmt: skip
    for ident, start in starts.items():
        if ident not in ends:
            _hear_orphan(found, start)
    for end in ends.values():
        found.hear("ended", end)
    found.dead.append((keeper_id, fd))


def _hear_orphan(found: Survey, start: dict) -> None:
    """A dead keeper's worker with no end in its journal: what its shim says."""
    if not start.get("status"):  # an older keeper's worker: no shim
        found.hear("orphaned", start)
        return
    written = shim.read_status(start["status"], shim.token_of(start))
    if written is None:
        alive = shim.same_process(start["pid"], start.get("ticks"))
        written = shim.read_status(start["status"], shim.token_of(start))  # (it may have ended)
        if written is None:
            found.hear("shim" if alive else "vanished", start)
            return
    found.hear("ended", shim.end_of(start, written))


def _adopt(found: Survey, keepers_dir: str, keeper_id: str) -> bool:
    """Connect to a live keeper and hear it; False when it cannot be asked (it is leaving)."""
    try:
        link, running, ended = KeeperLink.adopt(keepers_dir, keeper_id)
    except (OSError, ValueError) as exc:  # leaving: its socket gone, or closed on us
        log.debug("keeper %s: not adopted (%s)", keeper_id, exc)
        return False
    found.links.append(link)
    log.debug("keeper %s: adopted; %d worker(s) running, %d end(s) unrecorded", keeper_id,
              len(running), len(ended))  # fmt: skip
    for end in ended:
        found.hear("ended", end, link=link)
    for start in running:
        child = link.child(start["id"])
        if child is not None:
            found.hear("running", start, child)
    return True


@dataclass
class TakenBack:
    """What `take_back` did, by item name."""

    adopted: dict[tuple[str, int], KeptChild] = field(default_factory=dict)
    links: list[KeeperLink] = field(default_factory=list)
    # a dead keeper's workers whose shims still run: their start records, to be watched
    orphans: dict[tuple[str, int], dict] = field(default_factory=dict)
    recorded: list[str] = field(default_factory=list)  # ended while no manager ran
    lost: list[str] = field(default_factory=list)  # its keeper died: ended, counted failed
    requeued: list[str] = field(default_factory=list)  # never started

    def say(self) -> None:
        """One line each for what a user should know (the log)."""
        if self.recorded:
            log.info("%d worker(s) ended while no manager ran: their outcomes are recorded",
                     len(self.recorded))  # fmt: skip
        if self.adopted or self.orphans:
            log.info("%d worker(s) of a manager that stopped still run: adopted, not started "
                     "again", len(self.adopted) + len(self.orphans))  # fmt: skip
        if self.lost:
            log.warning("%d worker(s) lost their keeper while running: ended, their attempts "
                        "recorded failed and retried", len(self.lost))  # fmt: skip
        if self.requeued:
            log.info("%d item(s) were about to start when the last manager stopped: back in "
                     "line", len(self.requeued))  # fmt: skip
            log.debug("back in line: %s", ", ".join(self.requeued[:20]))


def take_back(ledger, state_dir: str) -> TakenBack:
    """Settle every item the ledger says is running (see the module docstring); the caller
    waits for the adopted ones (`LocalBackend.adopt`). Dead keepers' files are removed once
    their outcomes are in the ledger."""
    keepers_dir = os.path.join(state_dir, KEEPERS_DIR)
    found = survey(keepers_dir)
    taken = TakenBack(links=found.links)
    for name, attempts, pgid, pgid_start in ledger.running_rows():
        try:
            _settle_one(ledger, found, taken, name, attempts, pgid, pgid_start)
        except ClaimLost:  # a shared ledger: other managers took it while none of ours ran
            log.info("%s: its claim was taken while no manager of this directory ran", name)
    watched = {record["status"] for record in taken.orphans.values()}
    for keeper_id, fd in found.dead:
        for suffix in (".journal", ".sock", ".err", ".lock"):
            try:
                os.unlink(os.path.join(keepers_dir, keeper_id + suffix))
            except FileNotFoundError:
                pass
        _forget_shim_words(keepers_dir, keeper_id, keep=watched)
        os.close(fd)
    for link in found.links:  # a live keeper with nothing of ours left: let it go
        if not any(child.link is link for child in taken.adopted.values()):
            link.close(wait=0)
    return taken


def _forget_shim_words(keepers_dir: str, keeper_id: str, keep: set[str]) -> None:
    """A dead keeper's shims' files, now that its workers are settled - but for those of the
    workers this manager's keeper watches (it removes each once it has journaled the end)."""
    ends = os.path.join(keepers_dir, shim.ENDS_DIR)
    try:
        names = os.listdir(ends)
    except FileNotFoundError:
        return
    for entry in names:
        path = os.path.join(ends, entry)
        if entry.startswith(keeper_id + ".") and path not in keep:
            shim.forget_status(path)


def _settle_one(ledger, found: Survey, taken: TakenBack, name: str, attempts: int, pgid,
                pgid_start) -> None:  # fmt: skip
    """One running item of the ledger settled by the newest word on its attempt."""
    word = found.words.get((name, attempts))
    if word is None:
        if pgid:  # a ledger of an earlier version: its group is ended, the item put back
            end_process_group(pgid, pgid_start)
        ledger.requeue(name)
        taken.requeued.append(name)
    elif word.kind == "running":
        taken.adopted[(name, attempts)] = word.child
    elif word.kind == "shim":  # its keeper died, its shim still runs it: watched
        taken.orphans[(name, attempts)] = word.record
    elif word.kind == "vanished" or (word.kind == "ended" and word.record.get("interrupted")):
        # ended with its manager on purpose (a shared ledger), or gone with its shim: not the
        # item's doing - back in line, the attempt not counted
        ledger.requeue(name)
        if word.link is not None:
            word.link.ack(word.record["id"])
        taken.requeued.append(name)
    elif word.kind == "ended":
        code = word.record.get("code")
        error = word.record.get("error") or exit_error(code)
        try:
            ledger.finish(name, code == 0, code, error, at=word.record.get("at"))
        finally:  # recorded, or its claim lost: either way the keeper may forget it
            if word.link is not None:
                word.link.ack(word.record["id"])
        taken.recorded.append(name)
    else:
        end_process_group(word.record["pid"], word.record.get("ticks"))
        ledger.finish(name, False, None, LOST)
        taken.lost.append(name)
