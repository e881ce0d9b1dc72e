"""What every source says of an item, the same way: its time stamps and its media type.

Each source describes an item in its own terms (a file's path, an object's bucket and key, a
Redis member's data), but a few fields mean the same everywhere and are made here: `modified`
as RFC 3339 in UTC to the second, and `contentType` from the name's suffixes as `mimetypes`
knows them (what a worker uses to decide how to read the bytes).
"""

from __future__ import annotations

import functools
import mimetypes
from datetime import UTC, datetime


def rfc3339(epoch_seconds: float) -> str:
    return datetime.fromtimestamp(epoch_seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def content_type(name: str) -> str:
    """The media type by the name's last two suffixes (".mp4", ".tar.gz": all mimetypes looks
    at), as mimetypes knows them."""
    suffixes = name.rsplit("/", 1)[-1].split(".")[1:][-2:]  # not the stem: it varies
    return _content_type("." + ".".join(suffixes).lower() if suffixes else "")


@functools.lru_cache(maxsize=1024)  # a folder holds a handful of suffixes: one lookup each
def _content_type(suffixes: str) -> str:
    guessed, _ = mimetypes.guess_type("item" + suffixes, strict=False)
    return guessed or "application/octet-stream"
