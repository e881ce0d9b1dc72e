"""The keeper's side of its shims (`shim.py`): a slot's shim forked at the slot's first use
and kept, its word on each worker heard, its death settled, the shims of a keeper that died
watched, and what a worker left in its group ended before its end is reported.

`ShimSlots` is a part of `keeper.Keeper`, not a class of its own: its state - `children`,
`shims`, `by_pid`, `by_fd`, `slots`, `free_slots`, `slot_of`, `watched`, `leftovers` - is made
in `Keeper.__init__`, where its invariants are written, and an end it settles goes to
`Keeper._ended` (journaled, then reported). Like the keeper, it is the standard library and
its two sibling modules only: the keeper runs as a script.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import time

try:
    from . import keeper_protocol as wire
    from . import shim
except ImportError:  # run as a script (the keeper's): the sibling modules
    import keeper_protocol as wire  # type: ignore[no-redef]
    import shim  # type: ignore[no-redef]

LEFTOVER_GRACE_SECONDS = 5.0  # what a worker left in its group gets after SIGTERM


class SlotShim:
    """A slot's shim (`shim.py`): its process, its end of their socket pair, its status file,
    and the id of the worker it runs now (None: idle)."""

    def __init__(self, slot: int, pid: int, ticks: str, sock: socket.socket, status: str):
        self.slot, self.pid, self.ticks, self.sock, self.status = slot, pid, ticks, sock, status
        self.current: int | None = None


class ShimSlots:
    """The shims' half of the keeper (see the module docstring)."""

    def _idle_shim(self) -> SlotShim:
        """An idle slot's shim - forked for a new slot when none is idle."""
        while self.free_slots:
            runner = self.shims.get(self.free_slots.pop())
            if runner is not None:
                return runner
        slot = self.slots
        self.slots += 1
        return self._start(slot)

    def _start(self, slot: int) -> SlotShim:
        """The slot's shim, forked (`shim.serve` never returns in the child)."""
        status = shim.status_path(self.keepers_dir, self.id, slot)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            pid = os.fork()
        except OSError:
            ours.close()
            theirs.close()
            raise
        if pid == 0:
            ours.close()
            shim.serve(theirs, status, self.program, self.argv, self.env, self.manager)
        theirs.close()
        runner = SlotShim(slot, pid, shim.ticks_now(), ours, status)
        self.shims[slot] = runner
        self.by_pid[pid] = runner
        self.by_fd[ours.fileno()] = runner
        self.poller.register(ours.fileno(), select.EPOLLIN)
        return runner

    def _heard(self, runner: SlotShim) -> None:
        """The shim's word on its worker: its end (`shim._say`)."""
        try:
            data = runner.sock.recv(4096)
        except OSError:
            data = b""
        if not data:  # it is ending: reaped, then said (`_shim_died`)
            self._forget_fd(runner)
            return
        token, _, word = data.decode("utf-8", "replace").partition(" ")
        ident = runner.current
        if ident is None or self.children[ident].get("token") != token:
            return  # (a word on a worker this keeper has settled already)
        runner.current = None
        child = self.children.pop(ident)
        end = shim.end_of(child, shim.parse_word(word), None, time.time())
        self._ended(end)

    def _forget_fd(self, runner: SlotShim) -> None:
        fd = runner.sock.fileno()
        if self.by_fd.pop(fd, None) is not None:
            try:
                self.poller.unregister(fd)
            except (OSError, ValueError):
                pass

    def _watch(self, message: wire.Watch) -> None:
        """A shim a keeper that died left: watched through a pidfd, its worker's end reported
        as this keeper's own (under the id the manager gave it here)."""
        ident = message["id"]
        record = wire.Start(id=ident, name=message["name"], attempt=message["attempt"],
                            pid=message["pid"], ticks=message["ticks"],
                            boot=message.get("boot"), began=message.get("began"),
                            status=message["status"], token=message.get("token"))  # fmt: skip
        self.children[ident] = record
        self._write({"start": record})
        fd = shim.open_pidfd(record["pid"], record["ticks"])
        if fd is None:  # ended meanwhile: its file says how
            self._shim_ended(ident, None)
            return
        self.watched[fd] = ident
        self.poller.register(fd, select.EPOLLIN)

    def _signal(self, ident: int, sig: int) -> None:
        """The worker's whole group (its shim's: the shim outlives what it ignores), only while
        the shim runs this worker - and a watched one only while its shim is that process."""
        child = self.children.get(ident)
        if child is None:
            return
        slot = self.slot_of.get(ident)
        if slot is not None:
            runner = self.shims.get(slot)
            if runner is None or runner.current != ident:
                return
        elif not shim.same_process(child["pid"], child["ticks"]):
            return
        try:
            os.killpg(child["pid"], sig)
        except (ProcessLookupError, PermissionError):
            pass

    def _end_all(self) -> None:
        """The manager is gone without a goodbye: every worker's group is killed, its end
        journaled as interrupted (the attempt does not count: the item runs again)."""
        for ident, child in self.children.items():
            child["interrupted"] = True
            self._signal(ident, signal.SIGKILL)

    def _reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            runner = self.by_pid.pop(pid, None)
            if runner is not None:
                self._shim_died(runner, os.waitstatus_to_exitcode(status))

    def _shim_died(self, runner: SlotShim, code: int) -> None:
        """A slot's shim ended (killed, or with its manager): what it still said is heard; a
        worker it ran is settled by its file, ended with its group (`_shim_ended`); the slot's
        next worker gets a new shim."""
        if runner.sock.fileno() in self.by_fd:
            runner.sock.setblocking(False)
            try:
                while runner.current is not None and runner.sock.fileno() in self.by_fd:
                    self._heard(runner)
            except BlockingIOError:
                pass
            self._forget_fd(runner)
        runner.sock.close()
        if self.shims.get(runner.slot) is runner:
            del self.shims[runner.slot]  # (an idle slot's next worker gets a new shim)
        if runner.current is not None:
            ident, runner.current = runner.current, None
            self._shim_ended(ident, code)

    def _shim_ended(self, ident: int, code: int | None) -> None:
        """A shim ended with `ident` its worker (`code`: its exit; None: a watched one, not
        ours to reap): the worker's end as the shim wrote it, after its leftovers."""
        child = self.children.pop(ident)
        written = shim.read_status(child["status"], shim.token_of(child))
        end = shim.end_of(child, written, code, time.time())
        if written is None and code is None:  # a watched shim that left no word: killed with
            end["interrupted"] = True  # its worker - not the item's doing: it runs again,
            end["error"] = "its worker's shim ended without a word (killed with it)"  # uncounted
        elif written is None and code == 0:  # it left without taking this worker: never run
            end["interrupted"] = True
        pid = child["pid"]
        try:  # what it left in its group: ended before the end is reported
            os.killpg(pid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            self._ended(end)
            return
        self.leftovers[pid] = (time.monotonic() + LEFTOVER_GRACE_SECONDS, end)

    def _check_leftovers(self) -> None:
        now = time.monotonic()
        for pid, (kill_at, end) in list(self.leftovers.items()):
            try:
                os.killpg(pid, signal.SIGKILL if now >= kill_at else 0)
                if now < kill_at:
                    continue
            except (ProcessLookupError, PermissionError):
                pass
            del self.leftovers[pid]
            self._ended(end)

    def _slot_files(self) -> set[str]:
        return {runner.status for runner in self.shims.values()}
