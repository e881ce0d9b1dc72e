"""A folder as the manager's in-process source, for tests that drive a `Manager` directly
(the command line builds it from an ambassador configuration: `sources.folder.open_source`)."""

from __future__ import annotations

from kube_workqueue.ambassador.sources import FilesystemSource
from kube_workqueue.manager.sources.folder import FolderSource


def open_folder(root: str, suffixes: list[str], *, recursive: bool = False,
                settle: float = 2.0, version_by: str = "stat") -> FolderSource:  # fmt: skip
    """The folder's source, started (its first scan done). The caller's duty: `stop()`."""
    files = FilesystemSource(root, suffixes, recursive=recursive, settle=settle,
                             version_by=version_by)  # fmt: skip
    return FolderSource(files, f"folder {root}").start()
