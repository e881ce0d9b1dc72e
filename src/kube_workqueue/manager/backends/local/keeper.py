"""The keeper: the parent of a local manager's workers, so that how each one ended outlives the
manager.

Only a process's parent learns its exit status. When the manager itself started its workers, a
manager killed with -9 left them running as orphans of init, which reaped them and threw their
ends away: the next manager found "running" in the ledger and ran the item again - 28 of 200
items completed twice in a drive of random kills. A Kubernetes Job keeps its outcome when its
controller dies; here the keeper does, as containerd's shim keeps a container's exit status
when containerd restarts.

One keeper per manager run, started by it (`kept.KeeperLink.start`) in a session of its own - a
kill of the manager's process group, a closed terminal (SIGHUP) or a Ctrl-C (SIGINT) does not
reach it. It is small on purpose (the standard library, `shim`, `keeper_protocol` and its
shims' half, `keeper_shims`, only: run as a script), and does four things (five for a manager
on a shared ledger, whose workers end with it when it dies: another manager runs their items
once its claims run out):

  * starts each worker the manager asks for through its slot's shim (`shim.py`: forked once a
    slot, in a session of its own, each worker's parent - it writes the worker's end beside it
    so that it outlives this keeper too, and ends what the worker left), stdin /dev/null,
    stdout and stderr appended to the item's log (after the attempt's header line - the log's
    descriptor goes to the shim with the command), WORK_ITEM_FILE in its environment;
  * hears each end from the shim, and reports it; a shim that dies with a worker running has
    that worker's group ended here (SIGTERM, SIGKILL five seconds later for what is still
    there) before its end - the shim's - is reported;
  * watches the shims a keeper that died left (`watch`, through a pidfd), and reports their
    workers' ends as its own;
  * writes every start and end to its journal (`<id>.journal`, a JSON line each) before it
    reports them, and keeps what the manager has not acknowledged (an end is acknowledged once
    the ledger has it; the acknowledgement is journaled too, so a reader of the journal knows
    exactly which ends are still unrecorded);
  * signals a worker's group on request, only while the worker is not reaped (so a recycled
    pid is never hit).

Liveness is a lock, not a pid: the keeper holds an exclusive `flock` on `<id>.lock` for its
whole life. A later manager that can take that lock knows the keeper is gone and reads its
journal; one that cannot connects to `<id>.sock` and adopts the keeper's workers - it learns
which still run and is told each end as it comes (`recovery.py`).

The keeper leaves when it has no worker left and its manager said goodbye (everything it
reported is recorded: its files are removed) or is gone (its journal stays for the next
manager). SIGINT, SIGHUP and SIGPIPE are ignored; only SIGKILL (or SIGTERM, on purpose) ends it
early - its workers' shims live on, and the manager (or the next one) has them watched by
another keeper, or reads how each ended from its shim's file (`shim.py`, `recovery.py`).

Protocol: the messages to and from its manager, and its journal's entries, are
`keeper_protocol.py`'s typed records; to a shim, a JSON message over a sequenced-packet socket
pair with the log's descriptor beside it, and back the end's one line (`shim.py`). Workers are
named by the manager's id for the spawn, never by pid.
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import signal
import socket
import sys
import time

try:
    from . import keeper_protocol as wire
    from . import shim
    from .keeper_shims import ShimSlots, SlotShim
except ImportError:  # run as a script: the sibling modules
    import keeper_protocol as wire  # type: ignore[no-redef]
    import shim  # type: ignore[no-redef]
    from keeper_shims import ShimSlots, SlotShim  # type: ignore[no-redef]

COMPACT_BYTES = 1 << 20  # the journal is rewritten with only what still matters past this


class Keeper(ShimSlots):
    """The keeper's state. Invariants: every id in `children` names a worker started whose end
    is not yet journaled - run by a shim of this keeper (`slot_of` maps it to its slot, whose
    shim's `current` it is) or watched (a dead keeper's shim: `watched` maps its pidfd back);
    every end in `unacked` is in the journal; an id is in at most one of `children`,
    `leftovers` (its shim died, its group being ended) and `unacked`. A slot's shim is in
    `shims` while it lives (`by_pid`, `by_fd` map back to it); an idle one's slot is in
    `free_slots`."""

    def __init__(self, owner: socket.socket, config: dict, pending: bytes = b"") -> None:
        """`pending`: what the manager sent after the config, read with it."""
        self.id = config["id"]
        # Its files by the folder's descriptor; never a chdir: workers inherit the manager's
        # working directory (a relative worker command, relative paths in its arguments).
        self.dir_fd = os.open(config["dir"], os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        self.lock_fd = self._open(f"{self.id}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC)
        fcntl.flock(self.lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        self.journal_name = f"{self.id}.journal"
        self.journal = self._open(self.journal_name, self._journal_flags())
        self.journal_bytes = os.fstat(self.journal).st_size
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        # through the folder's descriptor: a socket's path is limited to 108 bytes
        self.listener.bind(f"/proc/self/fd/{self.dir_fd}/{self.id}.sock")
        self.listener.listen(4)
        self.program, self.argv, self.env = config["program"], config["argv"], config["env"]
        self.keepers_dir = config["dir"]
        os.makedirs(os.path.join(self.keepers_dir, shim.ENDS_DIR), mode=0o700, exist_ok=True)
        self.children: dict[int, dict] = {}  # id -> the worker's start record
        # Slots (`shim.py`): a slot is taken at a spawn and free again once that worker's end
        # is journaled; its shim is forked at its first use and kept; its file is created
        # once and written over ever after.
        self.shims: dict[int, SlotShim] = {}  # slot -> its live shim
        self.by_pid: dict[int, SlotShim] = {}
        self.by_fd: dict[int, SlotShim] = {}
        self.slots = 0  # slots made so far (the next one's number)
        self.free_slots: list[int] = []
        self.slot_of: dict[int, int] = {}  # id of a worker of ours -> its slot
        self.watched: dict[int, int] = {}  # a watched shim's pidfd -> id
        self.poller = select.epoll()
        self.leftovers: dict[int, tuple[float, dict]] = {}  # pid -> (SIGKILL at, end record)
        self.unacked: dict[int, dict] = {}  # id -> end record the manager has not recorded
        self.conn: socket.socket | None = owner
        # Invariant: False from a later manager's connect until its `adopt` is answered.
        # Nothing is sent to it before: the answer must be the first line it reads, and an
        # end meanwhile is in `unacked`, so in the answer (sent alone before it, it was read
        # as the answer).
        self.asked = True
        self.buffer = pending
        self.bye = False
        # A manager on a shared ledger (`manager.fleet`): its workers end with it. Its claims
        # then run out and another manager runs the items; a worker left running would run
        # beside that one.
        self.end_with_manager = bool(config.get("end_with_manager"))
        # (pid, start ticks) of the manager: its shims end their workers if it dies, should
        # this keeper die first and not do it
        self.manager = tuple(config["manager"]) if config.get("manager") else None

    def _open(self, name: str, flags: int) -> int:
        return os.open(name, flags, 0o600, dir_fd=self.dir_fd)

    @staticmethod
    def _journal_flags() -> int:
        return os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC

    # -- the journal -----------------------------------------------------------------------

    def _write(self, entry: dict) -> None:
        self._write_line(wire.line(entry))

    def _write_line(self, line: bytes) -> None:
        """Appended to the journal. A disk that refuses it (full, read-only, failing) does not
        stop the keeper: the manager holds dispatch for the same disk, and the ends go on being
        reported; only a manager that dies meanwhile leaves them unknown."""
        try:
            os.write(self.journal, line)
            self.journal_bytes += len(line)
            if self.journal_bytes > COMPACT_BYTES:
                self._compact()
        except OSError:
            pass

    def _compact(self) -> None:
        """The journal rewritten with what a later manager may still need: the starts of
        workers still running and the ends not yet recorded (written whole, then renamed)."""
        entries = [{"start": c} for c in self.children.values()]
        entries += [{"end": e} for e in self.unacked.values()]
        entries += [{"end": e} for _, e in self.leftovers.values()]
        body = b"".join(wire.line(entry) for entry in entries)
        new = self._open(self.journal_name + ".new", os.O_WRONLY | os.O_CREAT | os.O_TRUNC
                         | os.O_CLOEXEC)  # fmt: skip
        try:
            os.write(new, body)
        finally:
            os.close(new)
        os.replace(self.journal_name + ".new", self.journal_name,
                   src_dir_fd=self.dir_fd, dst_dir_fd=self.dir_fd)  # fmt: skip
        os.close(self.journal)
        self.journal = self._open(self.journal_name, self._journal_flags())
        self.journal_bytes = len(body)

    # -- talking to the manager ------------------------------------------------------------

    def _send(self, message: dict) -> None:
        self._send_line(wire.line(message))

    def _send_line(self, line: bytes) -> None:
        if self.conn is None or not self.asked:
            return
        try:
            self.conn.sendall(line)
        except OSError:  # the manager is gone: the journal has it
            self._drop_conn()

    def _drain_conn(self) -> None:
        """Everything still unread from the current connection, handled now: a manager that
        died may have asked for workers the keeper had not read yet, and the manager that
        adopts this keeper must hear of them in its answer (else it would start them too)."""
        if self.conn is None:
            return
        self.conn.setblocking(False)
        try:
            while True:
                data = self.conn.recv(65536)
                if not data:
                    break
                self._received(data)
        except OSError:  # nothing more for now (EAGAIN), or gone
            pass

    def _drop_conn(self) -> None:
        if self.conn is not None:
            try:
                self.poller.unregister(self.conn.fileno())
            except (OSError, ValueError):
                pass
            self.conn.close()
        self.conn, self.buffer, self.bye = None, b"", False

    def _received(self, data: bytes) -> None:
        self.buffer += data
        *lines, self.buffer = self.buffer.split(b"\n")
        for line in lines:
            if line:
                self._handle(json.loads(line))

    def _handle(self, message: dict) -> None:
        op = message["op"]
        if op == wire.SPAWN:
            self._spawn(message)
        elif op == wire.WATCH:
            self._watch(message)
        elif op == wire.SIGNAL:
            self._signal(message["id"], message["sig"])
        elif op == wire.ACK:
            self._acked(message["ids"])
        elif op == wire.ADOPT:  # a later manager: what still runs; ends come as they happen
            running = list(self.children.values())
            ended = list(self.unacked.values()) + [e for _, e in self.leftovers.values()]
            self.asked = True
            self._send(wire.Children(op=wire.CHILDREN, running=running, ended=ended))
        elif op == wire.BYE:
            self._acked(message.get("ack", []))
            self.bye = True

    # -- workers ---------------------------------------------------------------------------

    def _acked(self, ids: list[int]) -> None:
        """Recorded in the ledger: a later manager must not see these ends again."""
        acked = [i for i in ids if self.unacked.pop(i, None) is not None]
        if acked:
            self._write({"ack": acked})

    def _spawn(self, message: wire.Spawn) -> None:
        if "ack" in message:  # acknowledgements ride on the next start when there is one
            self._acked(message["ack"])
        ident, name, attempt = message["id"], message["name"], message["attempt"]
        part = "log"  # what refused: the state directory's disk (the log), or the program
        try:
            log_fd = os.open(message["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC,
                             0o644)  # fmt: skip
            try:
                os.write(log_fd, message["header"].encode("utf-8", "replace"))
                part = "program"
                runner = self._idle_shim()
                record = wire.Start(id=ident, name=name, attempt=attempt, pid=runner.pid,
                                    ticks=runner.ticks, boot=shim.boot_seconds(),
                                    began=time.time(), status=runner.status,
                                    token=str(ident))  # fmt: skip
                self.children[ident] = record
                self.slot_of[ident] = runner.slot
                runner.current = ident
                self._write({"start": record})  # journaled: now the shim may start it
                command = wire.compact({"t": record["token"], "env": message["env"]}).encode()
                try:
                    socket.send_fds(runner.sock, [command], [log_fd])
                except OSError:  # the shim is gone: it never had it - reaped, then said
                    pass
            finally:
                os.close(log_fd)
        except OSError as exc:
            why = f"cannot start worker: {exc.strerror}: {exc.filename or self.argv[0]}"
            end = wire.End(id=ident, code=None, error=why, errno=exc.errno, refused=part)
            self._send(wire.Ended(op=wire.ENDED, end=end))

    def _ended(self, end: wire.End) -> None:
        journaled, reported = wire.end_lines(wire.encoded_end(end))  # encoded once, for both
        self._write_line(journaled)
        # the journal has it now: the shim's word is not needed (its slot is free again; a
        # watched shim's file, a dead keeper's, goes)
        slot = self.slot_of.pop(end["id"], None)
        if slot is not None:
            self.free_slots.append(slot)
        elif end.get("status") and end.get("status") not in self._slot_files():
            shim.forget_status(end["status"])
        self.unacked[end["id"]] = end
        self._send_line(reported)

    # -- the loop --------------------------------------------------------------------------

    def run(self) -> None:
        wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # (a handler, so the fd is written)
        self.poller.register(wake_r, select.EPOLLIN)
        self.poller.register(self.listener.fileno(), select.EPOLLIN)
        self.poller.register(self.conn.fileno(), select.EPOLLIN)
        self._send(wire.Ready(op=wire.READY, pid=os.getpid()))  # the lock is held: ask it
        self._received(b"")  # requests that came with the config
        self._reap()
        while self.children or self.leftovers or (self.conn is not None and not self.bye):
            for fd, _ in self.poller.poll(0.05 if self.leftovers else -1):
                if fd == wake_r:  # SIGCHLD: drained, then every exited worker reaped
                    try:
                        while os.read(wake_r, 4096):
                            pass
                    except BlockingIOError:
                        pass
                    self._reap()
                elif fd == self.listener.fileno():
                    conn, _ = self.listener.accept()
                    self._drain_conn()  # what the last manager sent before it died counts
                    self._drop_conn()  # one manager at a time: the newest
                    self.conn, self.asked = conn, False
                    self.poller.register(conn.fileno(), select.EPOLLIN)
                elif fd in self.by_fd:  # a slot's shim: a worker's end
                    self._heard(self.by_fd[fd])
                elif fd in self.watched:  # a watched shim ended
                    self.poller.unregister(fd)
                    os.close(fd)
                    self._shim_ended(self.watched.pop(fd), None)
                elif self.conn is not None and fd == self.conn.fileno():
                    try:
                        data = self.conn.recv(65536)
                    except OSError:
                        data = b""
                    if data:
                        self._received(data)
                    else:
                        said_bye = self.bye
                        self._drop_conn()
                        if self.end_with_manager and not said_bye:
                            self._end_all()
            if self.leftovers:
                self._check_leftovers()
        self._leave()

    def _leave(self) -> None:
        """Every end reported is recorded (acknowledged): the files go. Otherwise the journal
        stays for the next manager; the lock is let go either way (by exiting)."""
        suffixes = (".sock", ".journal", ".lock", ".err") if not self.unacked else (".sock",)
        for suffix in suffixes:
            try:
                os.unlink(self.id + suffix, dir_fd=self.dir_fd)
            except OSError:  # gone, or a disk that refuses: the next manager tidies up
                pass
        for runner in self.shims.values():  # idle: its socket's end lets it go
            runner.sock.close()
        for runner in self.shims.values():  # and it is reaped here (its time is the keeper's)
            try:
                os.waitpid(runner.pid, 0)
            except (ChildProcessError, InterruptedError):
                pass
        for slot in set(self.free_slots):  # (a slot still taken: its shim writes there yet)
            shim.forget_status(shim.status_path(self.keepers_dir, self.id, slot))


def main() -> None:
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)
    for entry in os.listdir("/proc/self/fd"):  # workers get 0, 1 and 2 only
        if int(entry) > 2:
            try:
                os.set_inheritable(int(entry), False)
            except OSError:  # the listing's own descriptor, closed by now
                pass
    owner = socket.socket(fileno=3)
    owner.setblocking(True)
    received = b""
    while b"\n" not in received:  # the config, the first line the manager sends
        chunk = owner.recv(65536)
        if not chunk:
            sys.exit(1)
        received += chunk
    first, rest = received.split(b"\n", 1)
    Keeper(owner, json.loads(first), rest).run()


if __name__ == "__main__":
    main()
