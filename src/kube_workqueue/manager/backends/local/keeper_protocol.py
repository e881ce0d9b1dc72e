"""What a manager and its keeper say to each other, and what the keeper's journal holds: every
message and every record, typed, in one place (`kept.py` speaks for the manager, `keeper.py`
is the keeper; `recovery.py` reads a dead keeper's journal through `read_journal`).

JSON lines over a stream socket (fd 3 of a keeper its manager started; the listening
`<id>.sock` for a manager that adopts one):

    manager -> keeper                          keeper -> manager
    config   first, once: who it is, where     ready     once, after `config`: it holds
             its files go, the worker program              its lock and may be asked
    spawn    start a worker (acks ride on it)  ended     a worker's end, or why it could
    watch    a dead keeper's shim, taken over              not start
    signal   a worker's group, while it runs   children  the answer to `adopt`: the
    ack      ends the ledger has                           workers running, the ends unacked
    adopt    a later manager: what runs, what
             ended unrecorded
    bye      goodbye (its last acks)

The journal (`<id>.journal`) is a JSON line per entry: `{"start": Start}` before a worker may
start, `{"end": End}` before its end is reported, `{"ack": [ids]}` once the ledger has them.

The records are `TypedDict`s: at run time a message is the dict `json` gives and takes, so
typing them costs nothing on the path every item takes (a spawn, its end, its
acknowledgement). The keeper runs as a script with the standard library and its siblings
only (`shim.py`, this module): nothing here imports anything else of the project.
"""

# (no `from __future__ import annotations`: TypedDict reads `NotRequired` from evaluated
# annotations only)
import json
from typing import Literal, NotRequired, TypedDict

CONFIG, SPAWN, WATCH, SIGNAL, ACK, ADOPT, BYE = (
    "config", "spawn", "watch", "signal", "ack", "adopt", "bye",
)  # fmt: skip
READY, ENDED, CHILDREN = "ready", "ended", "children"

# one compact encoder, not one per line: the keeper's lines, and its commands to its shims
compact = json.JSONEncoder(separators=(",", ":")).encode
_encode_unescaped = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


class Start(TypedDict):
    """A worker's start, as the keeper journals it and a later manager is told it."""

    id: int  # the manager's id for the spawn (never a pid)
    name: str
    attempt: int
    pid: int  # its shim's
    ticks: str | None  # the shim's start time, in clock ticks since boot (a pid reused is not it)
    boot: float | None
    began: float | None
    status: str  # the shim's status file, where the worker's end is written
    token: str | None  # the worker's token in that file (an older keeper's: none)


class End(TypedDict, total=False):
    """A worker's end: its start record with what ended it (`shim.end_of`), or, for one that
    never started, its id with why."""

    id: int
    code: int | None  # its exit code (negative: the signal); None when not known
    at: float
    interrupted: bool  # not the item's doing: the attempt does not count
    error: str
    errno: int
    refused: str  # what refused a start: "log" (the state directory's disk) or "program"
    status: str


class Config(TypedDict):
    op: Literal["config"]
    id: str  # the keeper's id: its files are `<id>.journal`, `.lock`, `.sock`, `.err`
    dir: str  # the keepers' folder
    program: str
    argv: list[str]
    env: dict[str, str]
    end_with_manager: bool  # a shared ledger's: its workers end with their manager
    manager: list | None  # [pid, start ticks] of that manager, else None


class Spawn(TypedDict):
    op: Literal["spawn"]
    id: int
    name: str
    attempt: int
    log: str  # the item's log, appended to after `header`
    header: str
    env: dict[str, str]  # beside the config's: WORK_ITEM_FILE and the like
    ack: NotRequired[list[int]]


class Watch(TypedDict):
    op: Literal["watch"]
    id: int  # this manager's id for it from now on
    name: str
    attempt: int
    pid: int
    ticks: str | None
    boot: float | None
    began: float | None
    status: str
    token: str | None


class Signal(TypedDict):
    op: Literal["signal"]
    id: int
    sig: int


class Ack(TypedDict):
    op: Literal["ack"]
    ids: list[int]


class Adopt(TypedDict):
    op: Literal["adopt"]


class Bye(TypedDict):
    op: Literal["bye"]
    ack: list[int]


class Ready(TypedDict):
    op: Literal["ready"]
    pid: int


class Ended(TypedDict):
    op: Literal["ended"]
    end: End


class Children(TypedDict):
    op: Literal["children"]
    running: list[Start]
    ended: list[End]


def line(message: dict) -> bytes:
    """One of the keeper's messages or journal entries as its line."""
    return (compact(message) + "\n").encode()


def request_line(message: dict) -> bytes:
    """One of the manager's messages as its line: its text as UTF-8, not escaped (names and
    paths as they are), a name the file system gave as undecodable bytes sent as those bytes."""
    return (_encode_unescaped(message) + "\n").encode("utf-8", "surrogateescape")


def encoded_end(end: End) -> str:
    """An end's JSON, made once for the journal's line and the manager's (`end_lines`)."""
    return compact(end)


def end_lines(body: str) -> tuple[bytes, bytes]:
    """(the journal's `{"end": …}` line, the manager's `ended` message) of an end encoded once."""
    return f'{{"end":{body}}}\n'.encode(), f'{{"op":"{ENDED}","end":{body}}}\n'.encode()


def read_journal(path: str) -> tuple[dict[int, Start], dict[int, End]]:
    """A keeper's journal: (starts by id, ends by id), without what was acknowledged (in the
    ledger already). A torn last line (the keeper killed while writing it) is skipped."""
    starts: dict[int, Start] = {}
    ends: dict[int, End] = {}
    try:
        with open(path, "rb") as f:
            lines = f.read().split(b"\n")
    except OSError:  # none, or a disk that refuses: nothing known
        return starts, ends
    for text in lines:
        try:
            entry = json.loads(text)
        except ValueError:
            continue
        if "start" in entry:
            starts[entry["start"]["id"]] = entry["start"]
        elif "end" in entry:
            ends[entry["end"]["id"]] = entry["end"]
        elif "ack" in entry:
            for ident in entry["ack"]:
                ends.pop(ident, None)
                starts.pop(ident, None)
    return starts, ends
