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
    its keeper died while the worker ran        whatever is left of it is ended (pid and start
                                                 time from the journal, never a bare pid), and
                                                 the attempt is recorded failed: its end is lost
    no keeper ever started it                   back in line, the attempt not counted (the
                                                 manager died between the record and the start)

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
from .kept import LOST, KeeperLink, KeptChild, end_process_group, read_journal
from .process import KEEPERS_DIR, exit_error

log = logging.getLogger(__name__)

LEAVING_SECONDS = 30.0  # the longest a keeper may hold its lock with its socket gone


@dataclass
class Word:
    """The newest word on one attempt: its worker `running` (a child of a live keeper),
    `ended` (the keeper's end record) or `orphaned` (a dead keeper's start record, no end)."""

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
        key = (record["name"], record["attempt"])
        known = self.words.get(key)
        if known is None or known.record.get("began", 0) <= record.get("began", 0):
            self.words[key] = Word(kind, record, child, link)


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
            found.hear("orphaned", start)
    for end in ends.values():
        found.hear("ended", end)
    found.dead.append((keeper_id, fd))


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
    recorded: list[str] = field(default_factory=list)  # ended while no manager ran
    lost: list[str] = field(default_factory=list)  # its keeper died: ended, counted failed
    requeued: list[str] = field(default_factory=list)  # never started

    def say(self) -> None:
        """One line each for what a user should know (the log)."""
        if self.recorded:
            log.info("%d worker(s) ended while no manager ran: their outcomes are recorded",
                     len(self.recorded))  # fmt: skip
        if self.adopted:
            log.info("%d worker(s) of a manager that stopped still run: adopted, not started "
                     "again", len(self.adopted))  # fmt: skip
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
    for keeper_id, fd in found.dead:
        for suffix in (".journal", ".sock", ".err", ".lock"):
            try:
                os.unlink(os.path.join(keepers_dir, keeper_id + suffix))
            except FileNotFoundError:
                pass
        os.close(fd)
    for link in found.links:  # a live keeper with nothing of ours left: let it go
        if not any(child.link is link for child in taken.adopted.values()):
            link.close(wait=0)
    return taken


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
    elif word.kind == "ended" and word.record.get("interrupted"):
        ledger.requeue(name)  # ended by its keeper with the manager (a shared ledger)
        if word.link is not None:
            word.link.ack(word.record["id"])
        taken.requeued.append(name)
    elif word.kind == "ended":
        code = word.record.get("code")
        try:
            ledger.finish(name, code == 0, code, exit_error(code), at=word.record.get("at"))
        finally:  # recorded, or its claim lost: either way the keeper may forget it
            if word.link is not None:
                word.link.ack(word.record["id"])
        taken.recorded.append(name)
    else:
        end_process_group(word.record["pid"], word.record.get("ticks"))
        ledger.finish(name, False, None, LOST)
        taken.lost.append(name)
