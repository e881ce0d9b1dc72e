"""A shim per worker: the one process that knows how its worker ended, and writes it beside it.

Only a process's parent learns its exit status. The keeper (`keeper.py`) made its workers
outlive the manager; but a keeper killed with -9 - alone, or with its manager - left its
workers to init, which threw their ends away: a worker that had finished was recorded failed
and ran again (13 and 14 of 200 items completed twice in a drive of random kills), and one
still running was ended and counted failed for a death that was not its own. As containerd runs
a shim per container, the keeper now forks a shim per worker, in a session of its own:

    keeper ──fork──► shim (leads the worker's session and group; ignores the signals its group
                      │    is sent, so it outlives them and reports the worker's end)
                      └──posix_spawn──► worker (stdin /dev/null, stdout/stderr the item's log)

The shim waits for its worker, writes the worker's exit status to its slot's file,
`ends/<keeper>.<slot>` (one small write at the file's start: a torn line is no status), and
exits the way the worker did (the same code, or
killed by the same signal), so the keeper, its parent, reaps the worker's own status. When the
keeper dies, the shims live on: each writes its worker's end when it comes, and the next keeper
watches them through a pidfd (`watch`), or the next manager reads the file (`recovery.py`).
So a worker's end is known whoever dies - the manager, the keeper, or both - and a worker runs
again only when it never finished: its shim was killed too (a machine restart, a hand).

On a shared ledger (`end_with_manager`), a worker must not outlive its manager - another
manager runs its item once the dead one's claims go back. The keeper ends its workers when the
manager's connection drops; a keeper that died with its manager cannot, so the shim also
watches the manager's process (pid and start time, through a pidfd) and ends its worker's group
itself, writing `interrupted` (the attempt does not count).

A worker starts only once the keeper's journal has its start: the forked shim waits for the
keeper's go-ahead on a pipe (`release`, written after the journal line). A keeper killed
between its fork and its journal line closes the pipe by dying, and its shim then writes
`interrupted` and starts nothing - so a start the journal does not name never ran (a worker
no journal named would be known to nobody: its item recorded lost and run again while it
ran). And the manager's side can say of a spawn its dead keeper never journaled: not started,
not counted (`kept.KeeperLink._lost`).

The status file's first line is the shim's pid and its word: the exit code (negative: the
signal), `interrupted`, or `refused ERRNO MESSAGE` when the worker could not be started at
all. A slot's file is written over, never created and removed per worker: a create and an
unlink per item made ext4's inode allocator the dispatch's bottleneck (`recently_deleted`
scanned on every create: 2,000 `true` items took 1.8x as long as without the shims). So the
keeper marks a slot pending (a line no shim writes) before each fork, a slot is used again
only once its worker's end is in the keeper's journal, and a reader takes a line only from
the pid it expects - whatever an earlier occupant left is no status.
"""

from __future__ import annotations

import os
import select
import signal
import time

ENDS_DIR = "ends"
IGNORED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGPIPE)
# what the worker gets back at its default action: what the shim ignores, what Python ignores
RESTORED = (*IGNORED, signal.SIGXFSZ, signal.SIGCHLD)


LINE_WIDTH = 64  # every line is padded to at least this: it covers the pending mark whole
PENDING = b"0 -".ljust(LINE_WIDTH - 1) + b"\n"  # no shim's pid is 0


def status_path(keepers_dir: str, keeper_id: str, slot: int) -> str:
    """The file of keeper `keeper_id`'s slot `slot`: its current shim writes its end there."""
    return os.path.join(keepers_dir, ENDS_DIR, f"{keeper_id}.{slot}")


def mark_pending(fd: int) -> None:
    """A slot's file (open for writing) made to say nothing, before its next shim is forked."""
    os.pwrite(fd, PENDING, 0)


def read_status(path: str, pid: int) -> dict | None:
    """What the shim `pid` wrote: {"code": n} (negative: a signal), {"interrupted": True}, or
    {"refused": errno, "error": why}; None when it wrote nothing (yet), the line is torn, or
    it is another shim's (an earlier occupant of the slot)."""
    try:
        with open(path, "rb") as f:
            text = f.read(4096).decode("utf-8", "replace")
    except OSError:
        return None
    line, newline, _ = text.partition("\n")
    writer, _, said = line.strip().partition(" ")
    if not newline or writer != str(pid):
        return None
    word, _, rest = said.partition(" ")
    if word == "interrupted":
        return {"interrupted": True}
    if word == "refused":
        number, _, why = rest.partition(" ")
        return {"refused": int(number) if number.lstrip("-").isdigit() else None, "error": why}
    try:
        return {"code": int(word)}
    except ValueError:
        return None


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


def release(go: int) -> None:
    """The keeper's side of the go-ahead: its shim may start the worker (the start is in the
    journal). The pipe is closed either way; a keeper that dies before this closes it too."""
    try:
        os.write(go, b"g")
    except OSError:  # the shim is gone already: the keeper reaps it and reads its word
        pass
    finally:
        os.close(go)


def run(status: str, program: str, argv: list[str], env: dict, log_fd: int,
        manager: tuple[int, str] | None, wait_fd: int) -> None:  # fmt: skip
    """The shim's life, in the keeper's forked child: never returns (see the module
    docstring). `manager` (pid, start ticks): end the worker if that process dies first.
    `wait_fd`: the pipe the keeper's go-ahead comes through (`release`)."""
    try:
        # None of the keeper's descriptors: its lock held by a shim would make a dead keeper
        # look alive, its listening socket would take a later manager's connection
        low, high = sorted((log_fd, wait_fd))
        os.closerange(3, low)
        os.closerange(low + 1, high)
        os.closerange(high + 1, 1 << 20)
        signal.set_wakeup_fd(-1)  # the keeper's wake-up pipe is not the shim's
        for sig in IGNORED:
            signal.signal(sig, signal.SIG_IGN)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.setsid()
        if os.read(wait_fd, 1) != b"g":  # the keeper died before its journal had this start:
            _write(status, "interrupted")  # nobody would know of the worker - none starts
            os._exit(128 + signal.SIGKILL)
        os.close(wait_fd)
        actions = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                   (os.POSIX_SPAWN_DUP2, log_fd, 1), (os.POSIX_SPAWN_DUP2, log_fd, 2)]  # fmt: skip
        try:
            worker = os.posix_spawn(program, argv, env, file_actions=actions, setsigdef=RESTORED)
        except OSError as exc:
            _write(status, f"refused {exc.errno} {exc.strerror}: {exc.filename or program}")
            os._exit(127)
        os.close(log_fd)
        watched = open_pidfd(*manager) if manager is not None else None
        if manager is not None and watched is None:  # its manager is gone already
            _end_group()
            _reap(worker)
            _write(status, "interrupted")
            os._exit(128 + signal.SIGKILL)
        code = _wait(worker, watched)
        if code is None:  # the manager died first: the worker goes with it
            _write(status, "interrupted")
            os._exit(128 + signal.SIGKILL)
        _write(status, str(code))
        _exit_as(code)
    except BaseException:  # never back into the keeper's loop, whatever happened
        os._exit(126)


def _wait(worker: int, manager_fd: int | None) -> int | None:
    """The worker's exit code; None when the manager's process ended first (the worker's
    group then ended, the worker reaped)."""
    if manager_fd is None:
        return _reap(worker)
    worker_fd = os.pidfd_open(worker)
    while True:
        ready, _, _ = select.select([worker_fd, manager_fd], [], [])
        if worker_fd in ready:
            return _reap(worker)
        if manager_fd in ready:
            _end_group()
            _reap(worker)
            return None


def _reap(worker: int) -> int:
    while True:
        try:
            _, status = os.waitpid(worker, 0)
            return os.waitstatus_to_exitcode(status)
        except InterruptedError:
            continue


def _end_group() -> None:
    """The worker's whole group ended (the shim leads it: it ignores SIGTERM, not SIGKILL -
    so TERM first, then KILL to the others once they had their moment)."""
    os.killpg(0, signal.SIGTERM)
    time.sleep(1.0)
    for pid in _group_members():
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _group_members() -> list[int]:
    """The other processes of the shim's own group."""
    me, found = os.getpid(), []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != me:
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == me:  # pgrp
                found.append(int(entry))
    return found


def _write(path: str, line: str) -> None:
    """One write of one line, this shim's pid first, over the slot's pending mark (a shim
    killed mid-write leaves no whole line of its own: no status)."""
    body = f"{os.getpid()} {line.replace(chr(10), ' ')}".encode("utf-8", "replace")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        os.pwrite(fd, body.ljust(LINE_WIDTH - 1) + b"\n", 0)
    finally:
        os.close(fd)


def _exit_as(code: int) -> None:
    """Exit the way the worker did: its code, or killed by its signal."""
    if code < 0:
        try:
            signal.signal(-code, signal.SIG_DFL)
            os.kill(os.getpid(), -code)
            time.sleep(1.0)  # (the signal is delivered meanwhile)
        except (OSError, ValueError):
            pass
        os._exit(128 - code)
    os._exit(code)
