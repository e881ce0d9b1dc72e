"""The ambassador's two private folders in the temporary directory - the published snapshot
(`publication.py`) and prometheus-client's multiprocess metrics - made so that the folders of
an ambassador killed with SIGKILL are removed by the next one that starts.

An ambassador removes its folders when it stops. One killed with SIGKILL (an OOM kill, a
node's eviction, a `kill -9`) cannot, and each of its folders stayed: a machine that restarts
its ambassador after such deaths filled its temporary directory a snapshot at a time (a
million-item listing is tens of megabytes). So each folder is *held*: its maker takes an
exclusive `flock` on the folder itself and keeps that descriptor open for its life - gunicorn's
workers, forks of it, share the lock; the publisher, a program of its own, does not - and only
then writes the folder's `held` mark. The kernel lets go of the lock when the last process
holding it is gone, however it ended.

At its start an ambassador removes each folder that is (`remove_left_behind`):
    named as these are (`workqueue-ambassador-snapshot-*`, `workqueue-ambassador-metrics-*`),
    a real folder (not a symlink) owned by the same user,
    marked `held` - so it was made by this code, and locked before the mark was written -
    and not locked now: nobody who made or shares it is alive.
A folder without the mark - an older release's, or one whose maker has not written it yet -
is left alone: that is the one case a live ambassador's folder could look unlocked. The
removal is `shutil.rmtree`, which opens each level without following symlinks: nothing outside
the folder is touched, whatever it holds.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import stat
import tempfile

log = logging.getLogger(__name__)

SNAPSHOT_PREFIX = "workqueue-ambassador-snapshot-"
METRICS_PREFIX = "workqueue-ambassador-metrics-"
PREFIXES = (SNAPSHOT_PREFIX, METRICS_PREFIX)  # what the sweep at start looks at
HELD_MARK = "held"  # written in a folder once its maker holds the lock on it


def make_held(prefix: str) -> tuple[str, int]:
    """A new private folder (`tempfile.mkdtemp` with `prefix`, one of `PREFIXES`), locked and
    marked: (its path, the locked descriptor). The caller's duty: keep the descriptor open for
    as long as the folder is in use (a fork inherits the lock), and remove the folder when it
    is done with it."""
    path = tempfile.mkdtemp(prefix=prefix)
    fd = _open_folder(path)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # (a new folder: nobody else has it)
    mark = os.open(os.path.join(path, HELD_MARK), os.O_WRONLY | os.O_CREAT | os.O_EXCL
                   | os.O_CLOEXEC, 0o600)  # fmt: skip
    os.close(mark)
    return path, fd


def remove_left_behind(where: str | None = None) -> list[str]:
    """Remove the private folders in `where` (the temporary directory) that no live ambassador
    holds (see the module docstring); the paths removed. Never raises: a folder that cannot be
    looked at or removed is left as it is."""
    where = where or tempfile.gettempdir()
    removed = []
    try:
        names = os.listdir(where)
    except OSError:
        return removed
    for name in names:
        if name.startswith(PREFIXES):
            path = os.path.join(where, name)
            with contextlib.suppress(OSError):  # gone meanwhile, or not ours to open: left
                if _removed_if_left_behind(path):
                    removed.append(path)
    if removed:
        log.info("removed %d folder(s) left by ambassadors that were killed", len(removed))
    return removed


def _removed_if_left_behind(path: str) -> bool:
    """Remove `path` if it is a held folder of this user that nobody holds any more (under its
    lock, taken here); whether it was. An `OSError` propagates: the caller leaves it."""
    found = os.lstat(path)
    if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.getuid():
        return False
    fd = _open_folder(path)
    try:
        if not os.path.samestat(found, os.fstat(fd)):  # swapped since it was looked at
            return False
        try:
            mark = os.lstat(os.path.join(path, HELD_MARK))
        except FileNotFoundError:  # an older release's, or not marked yet: left alone
            return False
        if not stat.S_ISREG(mark.st_mode):
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # its ambassador (or one of its workers) lives
            return False
        shutil.rmtree(path, ignore_errors=True)
        return True
    finally:
        os.close(fd)  # (the lock with it)


def _open_folder(path: str) -> int:
    """A descriptor of the folder `path` itself, to lock: never through a symlink, not
    inherited by a program this process starts."""
    return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
