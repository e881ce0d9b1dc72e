"""Folders for tests: items made in one (`make_items`), and a folder as the manager's in-process
source, for tests that drive a `Manager` directly (the command line builds it from an
ambassador configuration: `sources.folder.open_source`)."""

from __future__ import annotations

import os

from kube_workqueue.ambassador.sources import FilesystemSource
from kube_workqueue.manager.sources.folder import FolderSource


def open_folder(root: str, suffixes: list[str], *, recursive: bool = False,
                settle: float = 2.0, version_by: str = "stat") -> FolderSource:  # fmt: skip
    """The folder's source, started (its first scan done). The caller's duty: `stop()`."""
    files = FilesystemSource(root, suffixes, recursive=recursive, settle=settle,
                             version_by=version_by)  # fmt: skip
    return FolderSource(files, f"folder {root}").start()


def make_items(folder, names):
    """A file of one byte for each of `names` in `folder` (made if missing), each last written
    long ago - settled, whatever the settle time."""
    folder.mkdir(exist_ok=True)
    old = 1_000_000_000
    for name in names:
        path = folder / name
        path.write_bytes(b"x")
        os.utime(path, (old, old))
