"""Keeping a folder's snapshot current after its first scan: file events, else polling.

The refresher is one thread per `FilesystemSource` (started by its `start()`); requests only
read the snapshot it keeps, so none of them waits on the file system.

  * Events: watchfiles (inotify on Linux) reports changed paths in batches of TICK_SECONDS;
    each path is looked at alone (`FilesystemSource.look_at`: one lstat) - a burst of changes
    costs per path, never a rescan of a folder of 100,000 files. The directories' mtimes are
    still checked every `safety_interval` as a safety net (`poll_dirs`), the first time one
    second in: a file created between the first scan and the moment inotify watches the
    folder raises no event.
  * Polling: where events are unavailable (watchfiles failed to start, or `force_polling`
    for network file systems such as NFS, whose inotify does not see other clients' writes)
    every known directory is stat'ed each `poll_interval` and only those whose mtime changed
    are rescanned. The source's `mode` says which ("events" / "polling").
  * Settling: files not yet settled are re-stated on every tick (their writes do not change
    the directory's mtime) and promoted by the snapshot once they have held still.

watchfiles gives up on a whole batch of events when one path in it is not valid UTF-8: that
file is no item (it is warned of once), what else the batch held is found by a rescan of what
changed, and the events are watched again. Any other failure of the watcher falls back to
polling for good; a failure inside one tick is logged and the next tick tries again.

Caller duty: the source's scanning state (`_dirs`, `_members`) is written only by `start()`'s
first scan and then by this thread - nothing else may call the source's scanning methods.
"""

from __future__ import annotations

import logging
import os
import re
import stat
import threading
import time
from typing import Protocol

from ..snapshot import Snapshot

log = logging.getLogger(
    "kube_workqueue.ambassador.sources.filesystem"
)  # the source's: one name to filter

TICK_SECONDS = 0.2  # how late a settled file may be promoted; also the event-batch window

# How watchfiles says an event named a path that is not valid UTF-8 (it then drops the batch).
UNDECODABLE_PATH = re.compile(r'Unable to decode path "(.*)" to string')


def unescape(shown: str) -> str:
    """The path watchfiles showed with `\\xHH` for its undecodable bytes, as Python names it
    (surrogate escapes): the name a scan of the folder finds."""
    raw = re.sub(
        rb"\\x([0-9A-Fa-f]{2})", lambda m: bytes([int(m.group(1), 16)]), os.fsencode(shown)
    )
    return os.fsdecode(raw)


class Folder(Protocol):
    """What the refresher needs of its source (`filesystem.FilesystemSource`)."""

    root: str
    recursive: bool
    use_events: bool
    poll_interval: float
    safety_interval: float
    snapshot: Snapshot
    mode: str  # written here: "events" or "polling"

    def look_at(self, abs_path: str) -> None: ...
    def poll_dirs(self) -> None: ...
    def warn_unservable(self, name: str) -> None: ...


class FolderRefresher:
    def __init__(self, folder: Folder, stop: threading.Event) -> None:
        self.folder = folder
        self.stop = stop

    def run(self) -> None:
        """The thread's body: events while they work, then polling, until `stop`."""
        folder = self.folder
        last_poll = time.monotonic()
        while folder.use_events:
            try:
                self._follow_events(last_poll - folder.safety_interval + 1.0)
                return
            except Exception as exc:  # inotify limits, unsupported file systems, ...
                if self.stop.is_set():
                    return
                undecodable = UNDECODABLE_PATH.search(str(exc))
                if undecodable is None:
                    log.warning(
                        "file events unavailable (%s); polling every %ss", exc, folder.poll_interval
                    )
                    break
                path = unescape(undecodable.group(1))
                folder.warn_unservable(os.path.relpath(path, folder.root))
                folder.poll_dirs()
                last_poll = time.monotonic()
        folder.mode = "polling"
        while not self.stop.wait(TICK_SECONDS):
            try:
                last_poll = self._tick(folder.poll_interval, last_poll)
            except Exception:  # never let one bad directory stop the refresher
                log.exception("refresh failed; will retry")

    def _follow_events(self, last_poll: float) -> None:
        import watchfiles

        # watchfiles says "N changes detected" at INFO on every batch: noise in our logs
        logging.getLogger("watchfiles").setLevel(logging.WARNING)

        folder = self.folder
        folder.mode = "events"
        for changes in watchfiles.watch(
            folder.root,
            watch_filter=None,
            debounce=int(TICK_SECONDS * 1000),
            step=50,
            stop_event=self.stop,
            rust_timeout=int(TICK_SECONDS * 1000),
            yield_on_timeout=True,
            recursive=folder.recursive,
            raise_interrupt=False,
        ):
            try:
                for path in sorted({p for _, p in changes}):
                    folder.look_at(path)
                last_poll = self._tick(folder.safety_interval, last_poll)
            except Exception:
                log.exception("refresh failed; will retry")

    def _tick(self, poll_every: float, last_poll: float) -> float:
        """Settling on every tick, the directories' mtimes every `poll_every` seconds; returns
        when they were last checked."""
        snapshot = self.folder.snapshot
        self._restat_pending()
        snapshot.promote_settled()
        now = time.monotonic()
        if now - last_poll >= poll_every:
            self.folder.poll_dirs()
            snapshot.promote_settled()
            return now
        return last_poll

    def _restat_pending(self) -> None:
        """One lstat of each file that has not settled yet: a write since shows as a new size
        or mtime; a file gone, or no longer a regular file, is forgotten."""
        folder = self.folder
        for name in folder.snapshot.pending_names():
            try:
                st = os.lstat(os.path.join(folder.root, *name.split("/")))
            except OSError:
                folder.snapshot.forget([name])
                continue
            if stat.S_ISREG(st.st_mode):
                folder.snapshot.observe(name, st.st_size, st.st_mtime_ns)
            else:
                folder.snapshot.forget([name])
