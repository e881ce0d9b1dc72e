"""Items are files on a (shared) volume: the video-thumbnailer source of
Burns' work-queue chapter.

Design: one scan at start fills the `Snapshot`; after that a refresher thread keeps it current
(`folder_refresh.py`: file events, else polling of the directories' mtimes, and settling), so a
request only reads memory (and stats the one file it describes). The refresher calls the
scanning here: `look_at` for one changed path (one lstat), `poll_dirs` for the directories
whose mtime changed (each re-read by `_scan_dir`), `warn_unservable` for a name no client
could ask for.

Never followed: symlinks (neither listed nor served, wherever they point) and hidden entries.
"""

from __future__ import annotations

import functools
import logging
import os
import stat
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote, urlsplit

from ..naming import (
    SkippedNames,
    is_candidate_file_name,
    is_hidden,
    is_representable,
    normalise_suffixes,
    parent_of,
)
from ..snapshot import Snapshot
from ..versions import METHODS, version_of
from .folder_refresh import FolderRefresher
from .items import content_type, rfc3339
from .registry import SourceConfigError, not_for

log = logging.getLogger(__name__)

CHUNK = 10_000  # files handed to the snapshot at once during a scan


def item_data(
    root: str, real_root: str, name: str, version_by: str = "stat"
) -> dict[str, Any] | None:
    """The data of the item `name` - a name the caller found in its own listing, never one a
    request made up - from one lstat of its file; None when it is no longer a regular file
    inside the root."""
    path = os.path.join(root, *name.split("/"))
    if "/" in name:
        # A directory on the way may have been swapped for a symlink since it was scanned.
        parent = os.path.realpath(os.path.join(root, *parent_of(name).split("/")))
        if parent != os.path.join(real_root, *parent_of(name).split("/")):
            return None
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return {
        "name": name,
        "path": path,
        "size": st.st_size,
        "modified": rfc3339(st.st_mtime),
        "contentType": content_type(name),
        "version": version_of(path, st, version_by),
    }


class FilesystemSource:
    def __init__(
        self,
        root: str,
        suffixes: tuple[str, ...] | list[str] = (".mp4",),
        *,
        recursive: bool = False,
        settle: float = 2.0,
        use_events: bool = True,
        force_polling: bool = False,
        poll_interval: float = 1.0,
        safety_interval: float = 10.0,
        clock: Callable[[], float] = time.time,
        version_by: str = "stat",
    ) -> None:
        if version_by not in METHODS:
            raise ValueError(f"version_by must be one of {', '.join(METHODS)}")
        self.version_by = version_by  # how an item's version is made (ambassador.versions)
        self.root = os.path.abspath(root)  # "as mounted": item paths are given under this
        self.suffixes = normalise_suffixes(suffixes)
        self.recursive = recursive
        self.use_events = use_events and not force_polling
        self.poll_interval = poll_interval
        self.safety_interval = safety_interval
        self.snapshot = Snapshot(settle, clock)
        self.mode = "not started"
        # Invariant (guarded by the refresher: only start() and the refresher thread write
        # these): _dirs maps every directory scanned ("" is the root) to its mtime_ns, and -
        # in recursive mode - _members maps it to the candidate names directly inside it. In
        # flat mode every candidate is in the root, so the snapshot's own names are its
        # members: not kept twice (a million names are 50 MB a copy).
        self._dirs: dict[str, int] = {}
        self._members: dict[str, set[str]] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._real_root = os.path.realpath(self.root)
        self._unservable = SkippedNames(f"folder {root}")  # names said once (not UTF-8 ...)

    @classmethod
    def from_config(cls, config: dict) -> FilesystemSource:
        """The source an app configuration describes (ROOT, SUFFIXES, RECURSIVE, SETTLE,
        FORCE_POLLING, POLL_INTERVAL, VERSION_BY)."""
        return cls(
            config["ROOT"],
            config.get("SUFFIXES") or [".mp4"],
            recursive=bool(config.get("RECURSIVE", False)),
            settle=float(config.get("SETTLE", 2.0)),
            force_polling=bool(config.get("FORCE_POLLING", False)),
            poll_interval=float(config.get("POLL_INTERVAL", 1.0)),
            version_by=config.get("VERSION_BY") or "stat",
        )

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        if not os.path.isdir(self.root):
            raise FileNotFoundError(f"root is not a directory: {self.root}")
        self._scan_dir("", initial=True)
        self.snapshot.promote_settled()
        refresher = FolderRefresher(self, self._stop)
        self._thread = threading.Thread(target=refresher.run, name="ambassador-fs", daemon=True)
        self._thread.start()

    def stop(self, wait: bool = True) -> None:
        """Stop refreshing; with `wait`, return once the refresher has (up to 5 s)."""
        self._stop.set()
        if wait and self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    # -- the Source interface --------------------------------------------------------------

    def page(self, after: str | None, limit: int | None) -> tuple[list[str], int, int]:
        return self.snapshot.page(after, limit)

    def subscribe(self):
        return self.snapshot.subscribe()

    def subscribe_events(self):
        return self.snapshot.subscribe_events()

    def unsubscribe(self, q) -> None:
        self.snapshot.unsubscribe(q)

    def __len__(self) -> int:
        return len(self.snapshot)

    def settling(self) -> int:
        """How many files are not listed yet because they have not held still for `settle`."""
        return len(self.snapshot.pending_names())

    @property
    def version(self) -> int:
        return self.snapshot.version

    def ready(self) -> bool:
        return os.access(self.root, os.R_OK | os.X_OK) and os.path.isdir(self.root)

    @property
    def problem(self) -> str | None:
        """Why the folder cannot be served now, or None (`/readyz`)."""
        return None if self.ready() else f"the root folder cannot be read: {self.root}"

    def get(self, name: str) -> dict[str, Any] | None:
        """Data of a listed item: one lstat of its file. Unknown names touch no file at all."""
        if name not in self.snapshot:
            return None
        return item_data(self.root, self._real_root, name, self.version_by)

    # -- scanning --------------------------------------------------------------------------

    def _scan_dir(self, rel_dir: str, *, initial: bool = False) -> None:
        """(Re)read one directory: observe new candidates, forget vanished ones, recurse into
        new subdirectories (recursive mode), forget subdirectories that went away."""
        path = os.path.join(self.root, *rel_dir.split("/")) if rel_dir else self.root
        try:
            dir_mtime = os.stat(path, follow_symlinks=False).st_mtime_ns
            entries = os.scandir(path)  # read as we go: a million entries are never all held
        except OSError:
            self._drop_dir(rel_dir)
            return
        self._dirs[rel_dir] = dir_mtime
        known = self._members.get(rel_dir, set()) if self.recursive else None
        seen: set[str] = set()
        subdirs: set[str] = set()
        observed: list[tuple[str, int, int]] = []  # handed to the snapshot in chunks
        with entries:
            self._read_entries(entries, rel_dir, known, seen, subdirs, observed, initial)
        self.snapshot.observe_many(observed, initial=initial)
        if known is None:
            self.snapshot.forget([n for n in self.snapshot.all_names() if n not in seen])
        else:
            self._members[rel_dir] = seen
            self.snapshot.forget(known - seen)
        for sub in subdirs:
            if sub not in self._dirs:
                self._scan_dir(sub, initial=initial)
        for gone in [d for d in self._dirs if parent_of(d) == rel_dir and d and d not in subdirs]:
            self._drop_dir(gone)

    def _read_entries(self, entries, rel_dir, known, seen, subdirs, observed, initial) -> None:
        """One pass over a directory's entries (see `_scan_dir`): candidate names into `seen`,
        those to look at into `observed` (handed over every CHUNK), subdirectories into
        `subdirs`. `known`: the directory's members (None in flat mode: the snapshot's)."""
        listed, suffixes = self.snapshot, self.suffixes
        prefix = rel_dir + "/" if rel_dir else ""
        # With no settling, a first scan lists what it finds: its size and mtime decide
        # nothing, so no file is stat'ed (an lstat is 5 us here: 5 s at a million files).
        blind = initial and listed.settle == 0
        for entry in entries:  # the hot loop of a cold start: a million times, kept lean
            part = entry.name
            if part[0] == ".":  # hidden (naming.is_hidden)
                continue
            try:
                if entry.is_file(follow_symlinks=False):
                    lower = part.lower()
                    if not lower.endswith(suffixes):
                        continue
                    if not is_candidate_file_name(part, suffixes):
                        if not is_representable(part):
                            self.warn_unservable(prefix + part)
                        continue
                    name = prefix + part
                    seen.add(name)
                    if (known is None or name in known) and name in listed:
                        continue  # listed already: no stat needed
                    if blind:
                        observed.append((name, -1, 0))
                    else:
                        st = entry.stat(follow_symlinks=False)
                        observed.append((name, st.st_size, st.st_mtime_ns))
                    if len(observed) >= CHUNK:
                        self.snapshot.observe_many(observed, initial=initial)
                        observed.clear()
                elif (
                    self.recursive
                    and entry.is_dir(follow_symlinks=False)
                    and is_representable(part)
                ):
                    subdirs.add(prefix + part)
            except OSError:
                continue  # vanished between listing and stat

    def warn_unservable(self, name: str) -> None:
        """Say once that a file that would be an item is not one, and why (counted)."""
        self._unservable.check(name)

    def _drop_dir(self, rel_dir: str) -> None:
        doomed = [d for d in self._dirs if d == rel_dir or d.startswith(rel_dir + "/")]
        if rel_dir == "":
            doomed = list(self._dirs)
        for d in doomed:
            self._dirs.pop(d, None)
            if self.recursive:
                self.snapshot.forget(self._members.pop(d, set()))
            elif d == "":
                self.snapshot.forget(self.snapshot.all_names())

    def look_at(self, abs_path: str) -> None:
        """One changed path reported by an event: one lstat decides what it now is."""
        rel = os.path.relpath(abs_path, self.root)
        if rel == "." or rel.startswith(".." + os.sep) or rel == "..":
            if rel == ".":
                self._scan_dir("")
            return
        parts = rel.split(os.sep)
        if any(is_hidden(p) for p in parts) or not all(is_representable(p) for p in parts):
            return
        name = "/".join(parts)
        parent = parent_of(name)
        if len(parts) > 1 and not self.recursive:
            return
        if parent not in self._dirs:
            return  # inside a directory we do not track (e.g. just removed)
        try:
            st = os.lstat(abs_path)
        except OSError:
            self._member(parent, name, False)
            self.snapshot.forget([name])
            if name in self._dirs:
                self._drop_dir(name)
            return
        if stat.S_ISREG(st.st_mode) and is_candidate_file_name(parts[-1], self.suffixes):
            self._member(parent, name, True)
            self.snapshot.observe(name, st.st_size, st.st_mtime_ns)
        elif stat.S_ISDIR(st.st_mode) and self.recursive:
            self._scan_dir(name)
        else:  # replaced by a symlink, a directory in flat mode, or renamed to a non-item
            self._member(parent, name, False)
            self.snapshot.forget([name])

    def _member(self, parent: str, name: str, present: bool) -> None:
        """Note `name` in (or out of) its directory's members (recursive mode only)."""
        if not self.recursive:
            return
        if present:
            self._members.setdefault(parent, set()).add(name)
        else:
            self._members.get(parent, set()).discard(name)

    def poll_dirs(self) -> None:
        for rel_dir, old_mtime in list(self._dirs.items()):
            if rel_dir not in self._dirs:
                continue  # dropped while we went through the list
            path = os.path.join(self.root, *rel_dir.split("/")) if rel_dir else self.root
            try:
                mtime = os.stat(path, follow_symlinks=False).st_mtime_ns
            except OSError:
                self._drop_dir(rel_dir)
                continue
            if mtime != old_mtime:
                self._scan_dir(rel_dir)


class FilesystemType:
    """The folder source type of the registry (`registry.py`): a path or `file:///path`."""

    kind = "filesystem"
    extra = ""  # nothing beyond the base install
    secret_variables = ""  # (a folder has no password)
    events = True  # inotify through watchfiles; polling where events are not seen (NFS)
    content_versions = False  # a digest of size and mtime, unless --version-by content
    data_groups = False  # a file's data is its path and stat
    settles = True

    def shown(self, config: dict) -> str:
        return os.path.abspath(config["ROOT"])

    def config_from_url(self, url: str, options: dict) -> dict:
        root = url
        if url.lower().startswith("file:"):
            parts = urlsplit(url)
            if parts.netloc not in ("", "localhost") or parts.query or parts.fragment:
                raise SourceConfigError(f"a file URL is file:///absolute/path, not {url!r}")
            root = unquote(parts.path)
        not_for("a folder", options, ("S3_ENDPOINT_URL", "SQS_QUEUE_URL"), only="S3 sources")
        not_for("a folder", options, ("RELIST_INTERVAL",), only="S3 and Redis sources")
        version_by = options.get("VERSION_BY") or "stat"
        if version_by not in METHODS:
            raise SourceConfigError(f"--version-by must be one of {', '.join(METHODS)}")
        return {
            "ROOT": root,
            "SUFFIXES": options.get("SUFFIXES") or [".mp4"],
            "RECURSIVE": bool(options.get("RECURSIVE")),
            "SETTLE": 2.0 if options.get("SETTLE") is None else float(options["SETTLE"]),
            "VERSION_BY": version_by,
            "FORCE_POLLING": bool(options.get("FORCE_POLLING")),
            "POLL_INTERVAL": float(options.get("POLL_INTERVAL") or 1.0),
        }

    def check(self, config: dict) -> None:
        root = config["ROOT"]
        if not os.path.isdir(root):
            raise SourceConfigError(f"not a folder: {root}")
        if not os.access(root, os.R_OK | os.X_OK):
            raise SourceConfigError(f"cannot read the folder {root} (permission denied)")
        try:
            normalise_suffixes(config["SUFFIXES"])
        except ValueError as exc:
            raise SourceConfigError(str(exc)) from None

    def open(self, config: dict) -> FilesystemSource:
        return FilesystemSource.from_config(config)

    def describe(self, config: dict, name: str, meta: str | None) -> dict[str, Any] | None:
        root = os.path.abspath(config["ROOT"])
        return item_data(root, _real(root), name, config.get("VERSION_BY") or "stat")


@functools.lru_cache(maxsize=16)
def _real(root: str) -> str:
    return os.path.realpath(root)  # resolved once, as FilesystemSource does at start


SOURCE_TYPE = FilesystemType()
