"""posix_spawn called through libc, so the interpreter lock is released while a child starts.

`os.posix_spawn` holds Python's interpreter lock for the whole call - the vfork, and the wait
for the child's exec, about 0.2 ms here - so while one dispatch thread starts a worker no other
thread of the manager runs: with two dispatch threads, starting workers was serialised with
everything else the manager does. A foreign function called through `ctypes` releases the lock
for its duration, so the same glibc call, made this way, lets the other threads work meanwhile.

What the child gets is what `spawn.Spawner` asks for, as with `os.posix_spawn`: stdin from
/dev/null, stdout and stderr to the log, a new session, and SIGPIPE and SIGXFSZ back to their
default actions (Python ignores SIGPIPE for itself; a worker must not inherit that, as
subprocess's `restore_signals` ensures).

Only on glibc (the flag values below are its own); `available()` says whether this can be used,
and `spawn.py` falls back to `os.posix_spawn` otherwise.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal

# glibc's <spawn.h>
POSIX_SPAWN_SETSIGDEF = 0x04
POSIX_SPAWN_SETSID = 0x80
_OPAQUE = 1024  # bytes for posix_spawn_file_actions_t (80 on x86-64) or posix_spawnattr_t (336)
_SIGSET = 128  # bytes of a sigset_t

_libc = None


def available() -> bool:
    """True on glibc, where the calls and flag values above are known."""
    global _libc
    if _libc is None:
        try:
            name = ctypes.util.find_library("c") or "libc.so.6"
            libc = ctypes.CDLL(name, use_errno=True)
            libc.gnu_get_libc_version  # noqa: B018 - glibc, or AttributeError
            libc.posix_spawn.argtypes = [
                ctypes.POINTER(ctypes.c_int),
                ctypes.c_char_p,
                ctypes.c_void_p,
                ctypes.c_void_p,
                ctypes.POINTER(ctypes.c_char_p),
                ctypes.POINTER(ctypes.c_char_p),
            ]
            _libc = libc
        except (OSError, AttributeError):
            _libc = False
    return bool(_libc)


class Template:
    """The parts of every start that do not change: program, argv, the environment but one
    variable, the signals reset - encoded once."""

    def __init__(self, program: str, argv: list[str], env: dict[str, str]) -> None:
        self.program = os.fsencode(program)
        self._argv = [os.fsencode(a) for a in argv]
        self._env = [os.fsencode(k) + b"=" + os.fsencode(v) for k, v in env.items()]
        self._argv_array = (ctypes.c_char_p * (len(self._argv) + 1))(*self._argv, None)
        # The attributes never change: made once. Environments are made once per value of the
        # extra variables (a few item-file slots), kept with the bytes they point into.
        self._attr = ctypes.create_string_buffer(_OPAQUE)
        sigdefault = ctypes.create_string_buffer(_SIGSET)
        _libc.sigemptyset(sigdefault)
        for sig in (signal.SIGPIPE, signal.SIGXFSZ):
            _libc.sigaddset(sigdefault, int(sig))
        _libc.posix_spawnattr_init(self._attr)
        _libc.posix_spawnattr_setsigdefault(self._attr, sigdefault)
        _libc.posix_spawnattr_setflags(self._attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGDEF)
        self._envs: dict[tuple, tuple] = {}

    def _envp(self, extra_env: dict[str, str]):
        key = tuple(extra_env.items())
        made = self._envs.get(key)
        if made is None:
            env = self._env + [os.fsencode(k) + b"=" + os.fsencode(v) for k, v in key]
            made = (env, (ctypes.c_char_p * (len(env) + 1))(*env, None))
            if len(self._envs) < 1024:
                self._envs[key] = made
        return made[1]

    def spawn(self, log_fd: int, extra_env: dict[str, str]) -> int:
        """Start the program; its pid. `OSError` when it cannot be started."""
        envp = self._envp(extra_env)
        actions = ctypes.create_string_buffer(_OPAQUE)
        libc = _libc
        libc.posix_spawn_file_actions_init(actions)
        try:
            libc.posix_spawn_file_actions_addopen(actions, 0, b"/dev/null", os.O_RDONLY, 0)
            libc.posix_spawn_file_actions_adddup2(actions, log_fd, 1)
            libc.posix_spawn_file_actions_adddup2(actions, log_fd, 2)
            pid = ctypes.c_int(0)
            error = libc.posix_spawn(
                ctypes.byref(pid), self.program, actions, self._attr, self._argv_array, envp
            )
        finally:
            libc.posix_spawn_file_actions_destroy(actions)
        if error:
            raise OSError(error, os.strerror(error), os.fsdecode(self.program))
        return pid.value
