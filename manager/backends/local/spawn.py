"""Starting one worker process, cheaply: `os.posix_spawn` in a new session, and waiting on it.

`subprocess.Popen` costs the manager's one interpreter about a third of a millisecond per item
before the child even exists: it encodes the whole environment in a Python loop, searches PATH,
builds and closes pipes, and runs `close_fds` bookkeeping - all while holding the interpreter
lock the other dispatch threads need. Here the program is found once (`Spawner`), the
environment encoded once, and glibc's posix_spawn starts the child with vfork semantics -
called through libc (`libc_spawn.py`) so the lock is released while it does, else through
`os.posix_spawn`:

    stdin   /dev/null
    stdout  the item's log (appended), stderr the same file
    session a new one (setsid): the child leads its own process group, so ending the item ends
            everything it started (`signal_group`)
    signals SIGPIPE and SIGXFSZ at their default actions (Python ignores them for itself)

Descriptors: posix_spawn closes only close-on-exec descriptors. Python, SQLite and the file
watcher open theirs close-on-exec; what can be inheritable is what the manager was handed when
it started (by its parent shell, a test runner). `Spawner` marks those close-on-exec once, when
it is made (a look at /proc/self/fd), so a worker inherits only 0, 1 and 2 - as `close_fds`
did, without its per-spawn cost (tests/manager/backends/local/test_spawn.py checks a real
worker's descriptors).

Waiting: `wait(timeout)` blocks in `waitpid` (the lock released) or, with a timeout, polls a
pidfd (Linux 5.3+; elsewhere a short sleep loop), so no thread spins. Exactly one thread - the
one that started the child - reaps it; others may signal its group while it is not reaped.
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import threading
import time

from . import libc_spawn

# Python ignores SIGPIPE (and SIGXFSZ) for itself; a worker gets their default actions back, as
# subprocess's restore_signals gives them.
RESTORED_SIGNALS = (signal.SIGPIPE, signal.SIGXFSZ)


class Spawner:
    """Starts `argv` again and again with `env` (None: the manager's own environment, as it
    is at construction) plus one variable that changes per item."""

    def __init__(self, argv: list[str], env: dict[str, str] | None = None) -> None:
        self.base_env = dict(os.environ if env is None else env)
        path = self.base_env.get("PATH", os.defpath)
        program = argv[0]
        if os.sep not in program:
            found = shutil.which(program, path=path)
            if found is None:
                raise FileNotFoundError(2, "No such file or directory", program)
            program = found
        self.program = program
        self.argv = list(argv)
        close_inherited()
        self._template = None
        if libc_spawn.available():  # the same call, without holding the interpreter lock
            self._template = libc_spawn.Template(program, self.argv, self.base_env)

    def start(self, log_fd: int, extra_env: dict[str, str]) -> Child:
        """The child, started; `OSError` when it cannot be (not found, not executable)."""
        if self._template is not None:
            return Child(self._template.spawn(log_fd, extra_env))
        env = {**self.base_env, **extra_env}
        actions = [
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_DUP2, log_fd, 1),
            (os.POSIX_SPAWN_DUP2, log_fd, 2),
        ]
        pid = os.posix_spawn(
            self.program,
            self.argv,
            env,
            file_actions=actions,
            setsid=True,
            setsigdef=RESTORED_SIGNALS,
        )
        return Child(pid)


def close_inherited() -> None:
    """Mark what this process inherited (descriptors above 2 its parent left open) close-on-
    exec, so that a process it starts gets 0, 1 and 2 only."""
    for fd in _inheritable():
        os.set_inheritable(fd, False)


def _inheritable() -> list[int]:
    """This process's inheritable descriptors above 2."""
    found = []
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        return found
    for entry in names:
        fd = int(entry)
        if fd <= 2:
            continue
        try:
            if os.get_inheritable(fd):
                found.append(fd)
        except OSError:  # closed meanwhile (or the listing's own descriptor)
            continue
    return found


class Child:
    """One started worker: its pid (also its process group's id) and, once reaped, its exit
    code (negative: the signal that ended it, as `Popen.returncode`)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self._lock = threading.Lock()  # orders reaping against signalling the group
        try:
            self._pidfd: int | None = os.pidfd_open(pid)
        except (AttributeError, OSError):
            self._pidfd = None

    def wait(self, timeout: float | None = None) -> int | None:
        """The exit code, reaping the child; None if it still runs after `timeout` seconds.
        Only the thread that started the child calls this."""
        if self.returncode is not None:
            return self.returncode
        if timeout is not None and not self._exited_within(timeout):
            return None
        _, status = os.waitpid(self.pid, 0)
        with self._lock:
            self.returncode = os.waitstatus_to_exitcode(status)
            if self._pidfd is not None:
                os.close(self._pidfd)
                self._pidfd = None
        return self.returncode

    def exited_within(self, timeout: float) -> bool:
        """True once the child has exited (reaped or not), waiting at most `timeout` s."""
        if self.returncode is not None:
            return True
        return self._exited_within(timeout)

    def _exited_within(self, timeout: float) -> bool:
        pidfd = self._pidfd
        if pidfd is not None:
            poller = select.poll()
            poller.register(pidfd, select.POLLIN)
            try:
                return bool(poller.poll(max(0, int(timeout * 1000))))
            except (OSError, ValueError):  # closed meanwhile: reaped, so it has exited
                return True
        deadline = time.monotonic() + timeout
        while True:
            try:
                if os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT):
                    return True
            except ChildProcessError:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)

    def signal_group(self, sig: int) -> bool:
        """Send `sig` to the child's process group while the child is not reaped (after that,
        the group id may name someone else's group one day). False when it was too late."""
        with self._lock:
            if self.returncode is not None:
                return False
            try:
                os.killpg(self.pid, sig)
            except (ProcessLookupError, PermissionError):
                return False
            return True

    def end(self, grace: float) -> None:
        """SIGTERM the group; SIGKILL it if the child has not exited `grace` s later."""
        if self.signal_group(signal.SIGTERM) and not self.exited_within(grace):
            self.signal_group(signal.SIGKILL)
