"""The small files beside the local ledger: how a queue is paused, and the facts of the
manager running on it - what `workqueue pause`, `resume` and `status` read and write without
opening the ledger.

    paused         {"since": epoch seconds} while the queue is paused (`workqueue pause`)
    parallelism    {"parallelism": N, "at": epoch seconds}: asked by `workqueue scale` (or the
                   built-in autoscaler), followed by the running manager within a second
    removals-accepted  {"at": epoch seconds}: the held removals accepted (`workqueue resume
                   --accept-removals`), acted on by the running manager within a second
    manager.json   the running manager's facts (`Asked.facts`), padded to 4 KiB so that on a
                   full disk it is rewritten in place (its own bytes need no new space)

Each is written whole (a temporary file renamed over it): a reader never sees half of one.
`QueueFiles` is the part of the `Ledger` port kept in them, mixed into `SqliteLedger`.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
import time

from .ledger_file import storage

MANAGER_FILE = "manager.json"  # the running manager's facts, for `workqueue status`
MANAGER_FILE_BYTES = 4096  # its size, kept: rewritten in place when the disk is full


PAUSED_FILE = "paused"  # {"since": epoch seconds} while the queue is paused


def read_paused(state_dir: str) -> float | None:
    """When the queue in `state_dir` was paused, or None."""
    try:
        with open(os.path.join(state_dir, PAUSED_FILE), encoding="utf-8") as f:
            return float(json.load(f)["since"])
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):
        return time.time()  # unreadable: stay paused rather than run what someone held back


def write_paused(state_dir: str, since: float | None) -> None:
    """Pause (the file written) or resume (removed)."""
    _replace_json(os.path.join(state_dir, PAUSED_FILE), None if since is None else {"since": since})


PARALLELISM_FILE = "parallelism"  # {"parallelism": N, "at": epoch seconds}: `workqueue scale`


def read_parallelism(state_dir: str) -> int | None:
    """The parallelism asked for the queue in `state_dir` (`workqueue scale`), or None."""
    try:
        with open(os.path.join(state_dir, PARALLELISM_FILE), encoding="utf-8") as f:
            wanted = json.load(f)["parallelism"]
    except (OSError, ValueError, KeyError, TypeError):
        return None  # none asked (or unreadable): the manager keeps what it has
    return (
        wanted if isinstance(wanted, int) and not isinstance(wanted, bool) and wanted >= 0 else None
    )


def write_parallelism(state_dir: str, parallelism: int) -> None:
    _replace_json(
        os.path.join(state_dir, PARALLELISM_FILE), {"parallelism": parallelism, "at": time.time()}
    )


GROUP_RULES_FILE = "group-rules"  # {"limits": [...], "rates": [...]}: `workqueue scale --limit`


def read_group_rules(state_dir: str) -> dict | None:
    """The group rules asked for the queue in `state_dir`, or None."""
    try:
        with open(os.path.join(state_dir, GROUP_RULES_FILE), encoding="utf-8") as f:
            found = json.load(f)
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def write_group_rules(state_dir: str, rules: dict) -> None:
    """Merge `rules` into what was asked (a kind left out keeps its rules)."""
    _replace_json(os.path.join(state_dir, GROUP_RULES_FILE),
                  {**(read_group_rules(state_dir) or {}), **rules})  # fmt: skip


ACCEPT_FILE = "removals-accepted"  # {"at": epoch seconds}: `workqueue resume --accept-removals`


def read_removals_accepted(state_dir: str) -> float | None:
    try:
        with open(os.path.join(state_dir, ACCEPT_FILE), encoding="utf-8") as f:
            return float(json.load(f)["at"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_removals_accepted(state_dir: str, at: float) -> None:
    _replace_json(os.path.join(state_dir, ACCEPT_FILE), {"at": at})


HELD_FILE = "removals-held"  # {"since": epoch seconds}: a mass removal the manager holds


def read_removals_held(state_dir: str) -> float | None:
    try:
        with open(os.path.join(state_dir, HELD_FILE), encoding="utf-8") as f:
            return float(json.load(f)["since"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_removals_held(state_dir: str, since: float | None) -> None:
    _replace_json(os.path.join(state_dir, HELD_FILE), None if since is None else {"since": since})


def _replace_json(path: str, body: dict | None, *, pad: int = 0) -> None:
    """`body` as JSON at `path`, written whole - a temporary file renamed over it, so a reader
    never sees half of it - or the file removed when `body` is None. With `pad`, the text is
    padded with spaces to that many bytes, and when a full disk refuses the temporary file
    the old file's own bytes are overwritten in place (they need no new space): how a manager
    on a full disk still tells `status` why it holds."""
    if body is None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        return
    text = json.dumps(body).encode()
    text += b" " * max(0, pad - len(text))
    temporary = f"{path}.{os.getpid()}.tmp"
    try:
        with open(temporary, "wb") as out:
            out.write(text)
        os.replace(temporary, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        if not pad or exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)  # FileNotFoundError: nothing to reuse
        try:
            if os.fstat(fd).st_size < len(text):
                raise
            os.pwrite(fd, text, 0)
        finally:
            os.close(fd)


def write_facts(state_dir: str, facts: dict | None) -> None:
    """The running manager's facts (None: it stopped, the file goes)."""
    _replace_json(os.path.join(state_dir, MANAGER_FILE), facts, pad=MANAGER_FILE_BYTES)


def running_manager(state_dir: str) -> dict | None:
    """The facts the manager running on `state_dir` left (`SqliteLedger.note_manager`), or None
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


class QueueFiles:
    """The `QueueControls` port: pause, parallelism, group rules, removal holds and manager
    facts, kept in the files above - mixed into `SqliteLedger` (which sets `state_dir`), and
    on its own for the queue commands (`QueueFiles.at(state_dir)`): one implementation the
    manager and `workqueue pause`/`scale`/`resume` share. A running manager asks for the first
    two twice a second: each file is read at most that often, the last answer kept between."""

    @classmethod
    def at(cls, state_dir: str) -> QueueFiles:
        """The controls of the queue whose ledger is in `state_dir`, without the ledger."""
        files = cls()
        files.state_dir = state_dir
        return files

    state_dir: str
    _paused: float | None = None
    _paused_read = float("-inf")  # time.monotonic() of the last read
    _wanted: int | None = None  # `workqueue scale`, as last read
    _wanted_read = float("-inf")
    _accepted: float | None = None  # `workqueue resume --accept-removals`, as last read
    _accepted_read = float("-inf")

    def paused_since(self) -> float | None:
        """From the `paused` file (`workqueue pause`)."""
        now = time.monotonic()
        if now - self._paused_read >= 0.5:
            self._paused, self._paused_read = read_paused(self.state_dir), now
        return self._paused

    @storage
    def set_paused(self, since: float | None) -> None:
        write_paused(self.state_dir, since)
        self._paused_read = float("-inf")

    @storage
    def accept_removals(self) -> None:
        write_removals_accepted(self.state_dir, time.time())
        self._accepted_read = float("-inf")

    def removals_accepted(self) -> float | None:
        """From the `removals-accepted` file (`workqueue resume --accept-removals`)."""
        now = time.monotonic()
        if now - self._accepted_read >= 0.5:
            self._accepted, self._accepted_read = read_removals_accepted(self.state_dir), now
        return self._accepted

    def removals_held_since(self) -> float | None:
        """From the `removals-held` file (a hold an earlier manager began)."""
        return read_removals_held(self.state_dir)

    @storage
    def hold_removals(self, since: float | None) -> None:
        write_removals_held(self.state_dir, since)

    def wanted_parallelism(self) -> int | None:
        """From the `parallelism` file (`workqueue scale`)."""
        now = time.monotonic()
        if now - self._wanted_read >= 0.5:
            self._wanted, self._wanted_read = read_parallelism(self.state_dir), now
        return self._wanted

    def want_parallelism(self, parallelism: int) -> None:
        write_parallelism(self.state_dir, parallelism)
        self._wanted, self._wanted_read = parallelism, time.monotonic()

    _rules_read = float("-inf")
    _rules: dict | None = None

    def wanted_group_rules(self) -> dict | None:
        """From the `group-rules` file (`workqueue scale --limit/--rate`)."""
        now = time.monotonic()
        if now - self._rules_read >= 0.5:
            self._rules, self._rules_read = read_group_rules(self.state_dir), now
        return self._rules

    def want_group_rules(self, rules: dict) -> None:
        write_group_rules(self.state_dir, rules)
        self._rules_read = float("-inf")

    def report(self, status: dict) -> None:
        """Nothing to write: `workqueue status` reads the ledger itself."""

    @storage
    def note_manager(self, facts: dict | None) -> None:
        """`manager.json`: written whole, removed when the manager stops (None). Readers
        check the pid in it is alive (`running_manager`)."""
        write_facts(self.state_dir, facts)
