"""A shim per slot: the one process that knows how each of its workers ended, and writes it
beside them.

Only a process's parent learns its exit status. The keeper (`keeper.py`) made its workers
outlive the manager; but a keeper killed with -9 - alone, or with its manager - left its
workers to init, which threw their ends away: a worker that had finished was recorded failed
and ran again (13 and 14 of 200 items completed twice in a drive of random kills). As containerd
runs a shim per container, the keeper runs its workers through shims - one per slot (a unit of
work at once), forked once and kept for the slot's life, in a session of its own:

    keeper ──fork, once a slot──► shim (leads its session and group, which its workers join;
      │  one command a worker       │   ignores the signals its group is sent; a subreaper:
      │  (the log's descriptor      │   what a worker leaves running comes back to it)
      │  passed with it)            └──posix_spawn, a worker at a time──► worker (stdin
      └◄── the worker's end ────────                        /dev/null, stdout/stderr its log)

Per worker the shim spawns it (one `posix_spawn`: a worker costs no fork of a Python process),
waits for it, ends what it left (its group, and every descendant - `SIGTERM`, `SIGKILL` five
seconds later for what is still there), writes its end to its slot's file, `ends/<keeper>.<slot>`
(one small write at the file's start, under the spawn's token: a torn line is no status), tells
the keeper on their socket, and takes the next. When the keeper dies, the shims live on: each
finishes its worker, writes its end, and exits on its socket's end - the next keeper watches
them through a pidfd (`watch`), or the next manager reads the file (`recovery.py`). So a
worker's end is known whoever dies - the manager, the keeper, or both - and a worker runs again
only when it never finished: its shim was killed too (a machine restart, a hand).

A shim's own death while its worker runs: its group - the worker and what it started - is ended
by the keeper (`SIGTERM`, then `SIGKILL`), and the end is the shim's (killed: a failed attempt,
retried), as a worker killed under it would be; a shim killed between two workers costs
nothing (the keeper forks another for the slot when it is next needed).

On a shared ledger (`end_with_manager`), a worker must not outlive its manager - another manager
runs its item once the dead one's claims go back. The keeper ends its workers when the manager's
connection drops; a keeper that died with its manager cannot, so the shim also watches the
manager's process (pid and start time, through a pidfd) and ends its worker's group itself,
writing `interrupted` (the attempt does not count).

A worker starts only once the keeper's journal has its start: the keeper sends the command after
the journal line. A keeper killed between the two never sends it, and its shim starts nothing
(it sees its socket end and exits) - so a start the journal does not name never ran. And the
manager's side can say of a spawn its dead keeper never journaled: not started, not counted
(`kept.KeeperLink._lost`).

The status file's first line is the spawn's token (the keeper's id for it) and its word: the
exit code (negative: the signal), `interrupted`, or `refused ERRNO MESSAGE` when the worker could
not be started at all. A slot's file is written over, never created and removed per worker (a
create and an unlink per item made ext4's inode allocator the dispatch's bottleneck), and a
reader takes a line only under the token it expects: an earlier occupant's is no status.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import sys
import time

ENDS_DIR = "ends"
IGNORED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGPIPE)
# what the worker gets back at its default action: what the shim ignores, what Python ignores
RESTORED = (*IGNORED, signal.SIGXFSZ, signal.SIGCHLD)


LINE_WIDTH = 64  # every line is padded to at least this: a shorter one leaves no tail of a longer
LEFTOVER_GRACE_SECONDS = 5.0  # what a worker left running gets after SIGTERM


def status_path(keepers_dir: str, keeper_id: str, slot: int) -> str:
    """The file of keeper `keeper_id`'s slot `slot`: its current shim writes its end there."""
    return os.path.join(keepers_dir, ENDS_DIR, f"{keeper_id}.{slot}")


def read_status(path: str, token: str | int) -> dict | None:
    """What a shim wrote of the spawn `token` (a journal's start record's `token`; a keeper of
    the release before wrote its shim's pid): {"code": n} (negative: a signal),
    {"interrupted": True}, or {"refused": errno, "error": why}; None when it wrote nothing of
    that spawn (yet), or the line is torn."""
    try:
        with open(path, "rb") as f:
            text = f.read(4096).decode("utf-8", "replace")
    except OSError:
        return None
    line, newline, _ = text.partition("\n")
    writer, _, said = line.strip().partition(" ")
    if not newline or writer != str(token):
        return None
    return parse_word(said)


def end_of(start: dict, written: dict | None, code: int | None = None,
           at: float | None = None) -> dict:  # fmt: skip
    """A worker's end record from its start record and what its shim wrote (`read_status`):
    the code written, else `code` (the shim's own exit, as its worker's); interrupted, or
    refused with why, as the shim said."""
    written = written or {}
    end = {**start, "code": written.get("code", code), "at": at}
    if written.get("interrupted"):
        end["interrupted"] = True
    elif "refused" in written:  # the program could not be started at all
        end.update(code=None, errno=written["refused"], refused="program",
                   error=f"cannot start worker: {written['error']}")  # fmt: skip
    return end


def forget_status(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def start_ticks(pid: int) -> str | None:
    """The kernel's start time of a process (clock ticks since boot), or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode("ascii", "replace")
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def boot_seconds() -> float:
    """Now on the clock that never steps (seconds since boot, suspend included): what orders
    the starts of one attempt (`recovery.Survey.hear`)."""
    return time.clock_gettime(time.CLOCK_BOOTTIME)


def parse_word(word: str) -> dict | None:
    """What a shim's word says (`read_status`'s shapes); None when it is none of them."""
    word = word.strip()
    head, _, rest = word.partition(" ")
    if head == "interrupted":
        return {"interrupted": True}
    if head == "refused":
        number, _, why = rest.partition(" ")
        return {"refused": int(number) if number.lstrip("-").isdigit() else None, "error": why}
    try:
        return {"code": int(head)}
    except ValueError:
        return None


def ticks_now() -> str:
    """The start time, in the kernel's terms (clock ticks since boot), of a process started
    just now: from the clock the kernel uses - reading a just-started process's /proc entry
    waits for its exec (0.2 ms here). Whoever compares allows a second's difference."""
    return str(int(time.clock_gettime(time.CLOCK_BOOTTIME) * CLOCK_TICKS))


def same_process(pid: int, ticks: str | None) -> bool:
    """Whether `pid` is still the process that started at `ticks` (clock ticks since boot,
    within a second: pids are not reused that fast), and alive - not a zombie waiting for a
    parent that died to be reaped by init."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            if f.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X"):
                return False
    except (OSError, IndexError):
        return False
    actual = start_ticks(pid)
    try:
        return actual is not None and ticks is not None and \
            abs(int(actual) - int(ticks)) <= CLOCK_TICKS  # fmt: skip
    except ValueError:
        return False


def open_pidfd(pid: int, ticks: str | None) -> int | None:
    """A pidfd for `pid` if it is still the process started at `ticks`; None if it is gone."""
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return None
    if not same_process(pid, ticks):  # (checked after opening: the fd pins the process)
        os.close(fd)
        return None
    return fd


def token_of(start: dict) -> str:
    """Under what a start record's worker's end is written: its `token`, or (a keeper of the
    release before, a shim per worker) its shim's pid."""
    return str(start.get("token") or start["pid"])


def serve(sock: socket.socket, status: str, program: str, argv: list[str], env: dict,
          manager: tuple[int, str] | None) -> None:  # fmt: skip
    """The shim's life, in the keeper's forked child: never returns (see the module
    docstring). `sock`: its end of the keeper's socket (a command a message, the log's
    descriptor passed with it); `status`: its slot's file; `manager` (pid, start ticks): end
    the worker if that process dies first."""
    try:
        keep = sock.fileno()
        os.closerange(3, keep)  # none of the keeper's descriptors: its lock held by a shim
        os.closerange(keep + 1, 1 << 20)  # would make a dead keeper look alive
        signal.set_wakeup_fd(-1)  # the keeper's wake-up pipe is not the shim's
        for sig in IGNORED:
            signal.signal(sig, signal.SIG_IGN)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.setsid()
        _become_subreaper()
        out = os.open(status, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
        watched = open_pidfd(*manager) if manager is not None else None
        if manager is not None and watched is None:  # its manager is gone already
            os._exit(0)
        while True:
            try:
                data, fds = _receive(sock)
            except InterruptedError:
                continue
            except OSError:
                data, fds = b"", []
            if not data:  # the keeper is gone (or let the slot go): nothing of ours runs
                os._exit(0)
            _one(sock, out, fds[0] if fds else -1, json.loads(data), program, argv, env,
                 watched)  # fmt: skip
    except BaseException:  # never back into the keeper's loop, whatever happened
        os._exit(126)


def _receive(sock) -> tuple[bytes, list[int]]:
    """A command and the descriptor beside it, close-on-exec (a worker gets 0, 1 and 2 only;
    `socket.recv_fds` drops its flags before Python 3.12, so `recvmsg` is asked directly)."""
    data, ancillary, _, _ = sock.recvmsg(1 << 20, socket.CMSG_LEN(4), socket.MSG_CMSG_CLOEXEC)
    fds: list[int] = []
    for level, kind, body in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds += [int.from_bytes(body[i : i + 4], sys.byteorder, signed=True)
                    for i in range(0, len(body) - len(body) % 4, 4)]  # fmt: skip
    return data, fds


def _one(sock, out: int, log_fd: int, command: dict, program: str, argv: list[str], env: dict,
         manager_fd: int | None) -> None:  # fmt: skip
    """One worker: started, waited for, what it left ended, its end written and told."""
    token = str(command["t"])
    actions = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
               (os.POSIX_SPAWN_DUP2, log_fd, 1), (os.POSIX_SPAWN_DUP2, log_fd, 2)]  # fmt: skip
    try:
        worker = os.posix_spawn(program, argv, {**env, **command["env"]},
                                file_actions=actions, setsigdef=RESTORED)  # fmt: skip
    except OSError as exc:
        _say(sock, out, token, f"refused {exc.errno} {exc.strerror}: {exc.filename or program}")
        return
    finally:
        if log_fd >= 0:
            os.close(log_fd)
    code = _wait(worker, manager_fd)
    if code is None:  # the manager died first: the worker went with it, and so does the shim
        _say(sock, out, token, "interrupted")
        os._exit(0)
    _end_leftovers()
    _say(sock, out, token, str(code))


_SUBREAPER = False  # set once the shim is one: then a leftover is always its child


def _become_subreaper() -> None:
    """What a worker leaves running, orphaned, comes back to the shim (Linux's
    PR_SET_CHILD_SUBREAPER): after each worker one `waitpid` says whether anything is left."""
    global _SUBREAPER
    try:
        import ctypes

        _SUBREAPER = ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):  # not Linux: the group is looked at instead
        _SUBREAPER = False


def _wait(worker: int, manager_fd: int | None) -> int | None:
    """The worker's exit code; None when the manager's process ended first (the worker's
    group then ended, the worker reaped)."""
    if manager_fd is None:
        return _reap(worker)
    worker_fd = os.pidfd_open(worker)
    try:
        while True:
            ready, _, _ = select.select([worker_fd, manager_fd], [], [])
            if worker_fd in ready:
                return _reap(worker)
            if manager_fd in ready:
                _end_group(grace=1.0)  # (the worker reaped with the rest)
                return None
    finally:
        os.close(worker_fd)


def _reap(worker: int) -> int:
    while True:
        try:
            _, status = os.waitpid(worker, 0)
            return os.waitstatus_to_exitcode(status)
        except InterruptedError:
            continue


def _end_leftovers() -> None:
    """What the worker left running (its group's other members; as a subreaper, every
    descendant, which comes back here when its parent ends) - SIGTERM, SIGKILL after the
    grace - all reaped. Nothing left: one `waitpid` and no more."""
    if not _children() and (_SUBREAPER or not _group_members()):
        return
    _end_group(grace=LEFTOVER_GRACE_SECONDS)


def _children() -> bool:
    """Whether any child is left (reaping those that ended)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        except InterruptedError:
            continue
        if pid == 0:
            return True


def _end_group(grace: float) -> None:
    """The worker's group and the shim's children ended (the shim ignores SIGTERM, not
    SIGKILL - so TERM to the group first, then KILL to each other member and child once they
    had `grace`), all reaped. A leftover's own children come back to the shim when it ends
    (a subreaper), after any list of them was taken: so each one that appears is sent TERM
    (within the grace) or KILL (after it) until none is left."""
    os.killpg(0, signal.SIGTERM)
    deadline = time.monotonic() + grace
    told: set[int] = set()
    while True:
        members = [] if _SUBREAPER else _group_members()  # (a look through /proc: once a round)
        if not _children() and not members:
            return
        late = time.monotonic() >= deadline
        for pid in set(_child_pids()) | set(members):
            if late or pid not in told:
                told.add(pid)
                try:
                    os.kill(pid, signal.SIGKILL if late else signal.SIGTERM)
                except (ProcessLookupError, PermissionError):
                    pass
        time.sleep(0.01 if late else 0.02)


def _child_pids() -> list[int]:
    """The shim's children (what its workers left, reparented here)."""
    try:
        with open(f"/proc/self/task/{os.getpid()}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def _group_members() -> list[int]:
    """The other processes of the shim's own group (a worker's leftovers that were never its
    children: none, as a subreaper - asked only where one cannot be)."""
    me, found = os.getpid(), []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != me:
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == me and fields[0] not in (b"Z", b"X"):  # pgrp, not a zombie
                found.append(int(entry))
    return found


def _say(sock, out: int, token: str, word: str) -> None:
    """The end written - one write of one line, the token first, over the slot's last (a shim
    killed mid-write leaves no whole line of this token: no status) - then told the keeper
    (gone: the file says it to the next one)."""
    line = f"{token} {word.replace(chr(10), ' ')}".encode("utf-8", "replace")
    os.pwrite(out, line.ljust(LINE_WIDTH - 1) + b"\n", 0)
    try:
        sock.send(line)
    except OSError:
        pass
