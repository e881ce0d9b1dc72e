"""The manager's side of a keeper (`keeper.py`): start one, ask it for workers, hear their ends.

`KeeperLink` is one connection to one keeper process - the one this manager started
(`KeeperLink.start`), or one a manager that died left behind and this manager adopts
(`KeeperLink.adopt`, in `recovery.py`). `KeptChild` is one worker through it, with the face of
a child process (wait, exited_within, signal_group, end), so the runner treats a worker it
started and one it adopted alike.

Costs on the dispatch path: one message out per start (the keeper answers nothing until the
end: a worker that cannot be started ends at once, with why), one message in per end, one
acknowledgement out once the ledger has the end (`ack`, called from the ledger's commit). One
reader thread per link hands each end to the thread that waits for it.

If the keeper itself dies (SIGKILL), its workers' shims (`shim.py`) live on: the reader sees
the socket close and hands each worker still running to the backend (`on_orphans`), which has
its next keeper watch the shim (`watch`) - its end, when it comes, is the worker's own, as if
the first keeper had lived. Only a worker whose shim is gone without a word (killed with it)
ends as lost. The backend starts a new keeper for the next worker as well.
"""

from __future__ import annotations

import errno
import fcntl
import itertools
import json
import logging
import os
import secrets
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable

from . import keeper_protocol as wire
from . import spawn
from .keeper_protocol import read_journal
from .kept_child import KeptChild
from .shim import start_ticks, token_of

log = logging.getLogger(__name__)

KEEPER_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "keeper.py")
READY_SECONDS = 60.0  # a keeper is a Python start: 30 ms here, far more on a loaded machine
LOST = "its keeper process died before the worker's end was known"
TAKEN = "another manager took its keeper over"
# a spawn its keeper died before starting: not the item's doing - it runs again, uncounted
UNSTARTED = {"code": None, "interrupted": True, "error": "its keeper died before starting it"}


class KeeperKilled(OSError):
    """A keeper killed by a signal before it was ready: not a keeper that cannot start - the
    caller may start another (`LocalBackend._keeper`)."""


def _killed(pid: int, within: float = 2.0) -> bool:
    """Whether the keeper `pid`, which closed its end or never answered, ended by a signal
    (reaped here; False when it lives on, or exited on its own)."""
    deadline = time.monotonic() + within
    while True:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return False
        if done:
            return os.WIFSIGNALED(status)
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)


class KeeperLink:
    """A connection to one keeper. Invariant (under `_lock`): `_children` holds every
    `KeptChild` of this link that has not ended; the reader thread alone ends them."""

    def __init__(self, conn: socket.socket, keepers_dir: str, keeper_id: str,
                 process: int | None = None) -> None:  # fmt: skip
        self.conn = conn
        self.keepers_dir = keepers_dir
        self.keeper_id = keeper_id
        self.process = process  # the keeper's pid when this manager started it (to reap it)
        self._children: dict[int, KeptChild] = {}  # not ended yet (the reader ends them)
        self._adopted: dict[int, KeptChild] = {}  # what `adopt` was told runs: never emptied
        self._ids = itertools.count(1)
        self._acks: list[int] = []  # ends the ledger has, not yet told to the keeper
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self.alive = True
        self.on_lost: Callable[[KeeperLink], None] | None = None
        # told the workers still running when the keeper died, each (child, start record)
        self.on_orphans: Callable[[list[tuple[KeptChild, dict]]], None] | None = None
        self._buffer = b""
        self._reader: threading.Thread | None = None

    # -- making one ------------------------------------------------------------------------

    @classmethod
    def start(cls, keepers_dir: str, spawner: spawn.Spawner, *,
              end_with_manager: bool = False) -> KeeperLink:  # fmt: skip
        """A new keeper for this manager's workers (what `spawner` would start), in a session
        of its own; its errors go to `<id>.err`. Waits until it says `ready` (it holds its
        lock: up to READY_SECONDS); an OSError when it does not."""
        os.makedirs(keepers_dir, mode=0o700, exist_ok=True)
        keeper_id = f"k{os.getpid()}-{secrets.token_hex(4)}"
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        err = os.path.join(keepers_dir, keeper_id + ".err")
        err_fd = os.open(err, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        try:
            spawn.close_inherited()
            os.set_inheritable(theirs.fileno(), True)  # even if it is 3 already
            actions = [
                (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                (os.POSIX_SPAWN_DUP2, err_fd, 1),
                (os.POSIX_SPAWN_DUP2, err_fd, 2),
                (os.POSIX_SPAWN_DUP2, theirs.fileno(), 3),
            ]
            argv = [sys.executable, "-S", "-E", "-s", "-B", KEEPER_SCRIPT]  # (stdlib only)
            pid = os.posix_spawn(sys.executable, argv, spawner.base_env, file_actions=actions,
                                 setsid=True)  # fmt: skip
        finally:
            os.close(err_fd)
            theirs.close()
        link = cls(ours, keepers_dir, keeper_id, process=pid)
        me = [os.getpid(), start_ticks(os.getpid())] if end_with_manager else None
        link._send(wire.Config(op=wire.CONFIG, id=keeper_id, dir=keepers_dir,
                               program=spawner.program, argv=spawner.argv,
                               env=spawner.base_env, end_with_manager=end_with_manager,
                               manager=me))  # fmt: skip
        # Nothing is asked of it before it holds its lock: a manager that died before then
        # would leave requests a later manager's survey could not see (and would run again).
        ours.settimeout(READY_SECONDS)
        try:
            ready = link._read_reply()
        except (OSError, ValueError):
            ready = {}
        ours.settimeout(None)
        if ready.get("op") != wire.READY:
            ours.close()
            if _killed(pid):
                raise KeeperKilled(errno.EINTR, "the workers' keeper was killed as it started")
            raise OSError(errno.EIO, f"the workers' keeper did not start (see {err})")
        link._start_reader()
        return link

    @classmethod
    def adopt(cls, keepers_dir: str, keeper_id: str) -> tuple[KeeperLink, list[dict], list[dict]]:
        """Connect to a live keeper a manager that died left: (the link, the start records of
        the workers it still runs, the ends it holds unrecorded). `OSError` (`ValueError`: not a
        line of JSON) if it is gone or does not answer first; the connection is closed then."""
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        dir_fd = os.open(keepers_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:  # through the folder's descriptor: a socket's path is limited to 108 bytes
            conn.settimeout(10)
            conn.connect(f"/proc/self/fd/{dir_fd}/{keeper_id}.sock")
        except OSError:
            conn.close()
            raise
        finally:
            os.close(dir_fd)
        link = cls(conn, keepers_dir, keeper_id)
        try:
            link._send(wire.Adopt(op=wire.ADOPT))
            reply = link._read_reply()
            if reply.get("op") != wire.CHILDREN:  # (the keeper answers before anything else)
                raise OSError(
                    errno.EPROTO, f"the workers' keeper {keeper_id} answered {reply.get('op')!r}"
                )
        except (OSError, ValueError):  # not adopted: the survey asks again, on a new connection
            conn.close()
            raise
        conn.settimeout(None)
        for record in reply["running"]:  # before the reader: an end it reads finds its child
            child = KeptChild(link, record["id"], record["began"])
            with link._lock:
                link._children[record["id"]] = child
            link._adopted[record["id"]] = child
        link._start_reader()
        return link, reply["running"], reply["ended"]

    def _read_reply(self) -> dict:
        while b"\n" not in self._buffer:
            chunk = self.conn.recv(65536)
            if not chunk:
                raise ConnectionResetError("the keeper closed the connection")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def child(self, ident: int) -> KeptChild | None:
        """An adopted worker, by its id: running when it was adopted, perhaps ended since (its
        end is on it). Never None for one the keeper named running: a worker that ends between
        the keeper's answer and this call must still be heard of - passed over, its item looked
        never started and ran again (1 item in the drive under load)."""
        return self._adopted.get(ident)

    # -- asking ----------------------------------------------------------------------------

    def _send(self, message: dict) -> bool:
        data = wire.request_line(message)
        with self._send_lock:
            try:
                self.conn.sendall(data)
                return True
            except OSError:
                return False

    def spawn(self, name: str, attempt: int, log_path: str, header: str,
              extra_env: dict) -> KeptChild:  # fmt: skip
        """Ask for a worker for `name`'s `attempt`, its output appended to `log_path` after
        `header`. Its end (or why it could not start) comes to the returned child."""
        ident = next(self._ids)
        child = KeptChild(self, ident)
        with self._lock:
            self._children[ident] = child
            alive = self.alive
        request = wire.Spawn(op=wire.SPAWN, id=ident, name=name, attempt=attempt,
                             log=log_path, header=header, env=extra_env)  # fmt: skip
        with self._lock:
            if self._acks:
                request["ack"], self._acks = self._acks, []
        if not alive or not self._send(request):
            with self._lock:
                self._children.pop(ident, None)
            child._end(UNSTARTED)
        return child

    def watch(self, child: KeptChild, record: dict) -> None:
        """Have this keeper watch a worker whose keeper died (`record`: its start record from
        that keeper's journal, with its shim's pid, start ticks and status file): `child` -
        whoever waits for it - is this link's from now on, and hears its end from here."""
        ident = next(self._ids)
        with self._lock:
            child.link, child.id = self, ident
            self._children[ident] = child
            alive = self.alive
        request = wire.Watch(op=wire.WATCH, id=ident, name=record["name"],
                             attempt=record["attempt"], pid=record["pid"],
                             ticks=record.get("ticks"), boot=record.get("boot"),
                             began=record.get("began"), status=record["status"],
                             token=token_of(record))  # fmt: skip
        if not alive or not self._send(request):
            with self._lock:
                self._children.pop(ident, None)
            child._end({"code": None, "error": LOST})

    def signal(self, ident: int, sig: int) -> bool:
        return self._send(wire.Signal(op=wire.SIGNAL, id=ident, sig=int(sig)))

    def ack(self, ident: int) -> None:
        """The ledger has this worker's end: the keeper need not keep it. Sent with the next
        start (one message fewer per item), or with the goodbye (`close`)."""
        with self._lock:
            self._acks.append(ident)

    @property
    def running(self) -> int:
        with self._lock:
            return len(self._children)

    def close(self, wait: float = 10.0) -> None:
        """Goodbye: the keeper leaves once its workers have ended (the caller has ended them or
        waited for them). The keeper this manager started is waited for, up to `wait` s."""
        with self._lock:
            acks, self._acks = self._acks, []
        self._send(wire.Bye(op=wire.BYE, ack=acks))
        if self.process is not None:
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline:
                try:
                    pid, _ = os.waitpid(self.process, os.WNOHANG)
                except ChildProcessError:
                    break
                if pid:
                    break
                time.sleep(0.01)
        try:
            self.conn.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.conn.close()

    # -- hearing ---------------------------------------------------------------------------

    def _start_reader(self) -> None:
        self._reader = threading.Thread(target=self._read, name=f"keeper-{self.keeper_id}",
                                        daemon=True)  # fmt: skip
        self._reader.start()

    def _read(self) -> None:
        try:
            while True:
                # what came with the first answer first: an end in the same read as `adopt`'s
                # answer is already in the buffer, and the keeper may say nothing more
                *lines, self._buffer = self._buffer.split(b"\n")
                for line in lines:
                    message = json.loads(line)
                    if message.get("op") == wire.ENDED:
                        end = message["end"]
                        with self._lock:
                            child = self._children.pop(end["id"], None)
                        if child is not None:
                            child._end(end)
                try:
                    chunk = self.conn.recv(65536)
                except OSError:
                    chunk = b""
                if not chunk:
                    break
                self._buffer += chunk
        finally:
            self._lost()

    def _lost(self) -> None:
        """The connection closed. After a goodbye, nothing runs; otherwise the keeper died:
        its workers' shims live on, and each worker still running is handed to `on_orphans`
        (the backend's next keeper watches it); one whose shim is gone too, or that an older
        keeper started without one, is ended and told its end was lost."""
        with self._lock:
            self.alive = False
            left, self._children = self._children, {}
        if not left:
            return
        deadline = time.monotonic() + 2.0  # a killed keeper's socket may close before its lock
        while keeper_alive(self.keepers_dir, self.keeper_id) and time.monotonic() < deadline:
            time.sleep(0.02)
        if keeper_alive(self.keepers_dir, self.keeper_id):  # another manager took it over
            for child in left.values():
                child._end({"code": None, "error": TAKEN})
            return
        starts = read_journal(os.path.join(self.keepers_dir, self.keeper_id + ".journal"))[0]
        orphans, lost = [], 0
        for ident, child in left.items():
            record = starts.get(ident)
            if record is None:  # never journaled, so never sent to a shim: never started
                child._end(UNSTARTED)
                continue
            if record.get("status") and self.on_orphans is not None:
                orphans.append((child, record))
                continue
            end_process_group(record["pid"], record.get("ticks"))
            child._end({"code": None, "error": LOST})
            lost += 1
        log.warning("a keeper of this manager's workers died: %d worker(s) watched by the next "
                    "one, %d end(s) lost", len(orphans), lost)  # fmt: skip
        if orphans:
            self.on_orphans(orphans)
        if self.on_lost is not None:
            self.on_lost(self)


SAME_START_TICKS = os.sysconf("SC_CLK_TCK")  # two start times this close (1 s) are one process's


def end_process_group(pgid: int, start: str | None) -> None:
    """Kill a process group whose keeper died, if it is still that group: its leader started
    when the journal (or an earlier version's ledger) says - within a second; pids are not
    reused that fast."""
    actual = start_ticks(pgid)
    try:
        if start is None or actual is None or abs(int(actual) - int(start)) > SAME_START_TICKS:
            return
    except ValueError:  # not a start time: nothing proves the group is ours
        return
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def keeper_alive(keepers_dir: str, keeper_id: str) -> bool:
    """Whether the keeper still holds its lock (a lock, not a pid: see keeper.py)."""
    try:
        fd = os.open(os.path.join(keepers_dir, keeper_id + ".lock"), os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
