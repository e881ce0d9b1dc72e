"""An item's version: what changes when the file does, so a manager can tell a new upload from
the one it already processed.

    stat     (default) a digest of the file's size and modification time (nanoseconds): free,
             and right wherever mtimes are honest - a file rewritten in place, or copied again
             with new bytes or a new mtime, gets a new version
    content  a digest of the bytes (SHA-256): for sources where mtimes lie (a copy that
             preserves them, a clock that goes back), and to tell "the same bytes again" from
             a real change. Computed once per (path, inode, size, mtime): a listing does not
             re-read files that did not change.

Versions are opaque strings to the manager: it compares them for equality, nothing else.
"""

from __future__ import annotations

import hashlib
import os
from functools import lru_cache

METHODS = ("stat", "content")


def version_of(path: str, st: os.stat_result, by: str = "stat") -> str:
    if by == "content":
        digest = _content_digest(path, st.st_ino, st.st_size, st.st_mtime_ns)
        if digest is not None:
            return "c-" + digest
    key = f"{st.st_size}:{st.st_mtime_ns}".encode()
    return "s-" + hashlib.sha256(key).hexdigest()[:16]


@lru_cache(maxsize=65_536)
def _content_digest(path: str, inode: int, size: int, mtime_ns: int) -> str | None:
    """The bytes' digest; the other arguments make the cache key (a changed file misses)."""
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    except OSError:
        return None  # unreadable now: the stat version stands in
    return h.hexdigest()[:32]
