"""The tail of an item's log file: what `workqueue status NAME` and the dashboard show.

A worker's log can be large and is still being written; only its last 64 KiB are read, decoded
leniently (a worker may print anything), and split into lines. A log that cannot be read is
None, never an error: it is a courtesy beside the item's state, which comes from the ledger.
"""

from __future__ import annotations

import os

TAIL_BYTES = 64 * 1024


def log_tail(path: str | None, lines: int = 20) -> list[str] | None:
    """The last `lines` lines of the file at `path`, or None when there is no such file or it
    cannot be read."""
    if not path or lines <= 0:
        return None
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - TAIL_BYTES))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return None
    return text.splitlines()[-lines:]
