"""The worker's program, found once, and the environment every worker gets.

`Spawner` finds the program on PATH once (a missing one fails at the first item, one line),
copies the environment once, and marks what this process inherited close-on-exec, so that a
keeper it starts - and the workers that keeper's shims start - get descriptors 0, 1 and 2 only
(Python, SQLite and the file watcher open theirs close-on-exec; what can be inheritable is what
the manager was handed when it started, by its parent shell or a test runner). Workers are
started by the keeper's shims (`keeper.py`, `shim.py`), never by the manager itself: their ends
must outlive it.
"""

from __future__ import annotations

import os
import shutil


class Spawner:
    """What the keeper starts again and again: `argv` with `env` (None: the manager's own
    environment, as it is at construction), plus one variable that changes per item."""

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
