"""What counts as an item, and how an item's name maps to a path under the root.

An item is a regular file (never a symlink, never a directory) whose file name ends with one of
the configured suffixes, compared case-insensitively, that is not hidden and not a copy in
progress. Its *name* is its path relative to the root with `/` between parts; names contain `/`
only in recursive mode. A name is only ever produced from a directory listing of the root: the
server never turns a name it was *sent* into a path unless that name is in its own listing
(api.py), so `..`, encoded slashes, NUL and absolute paths cannot reach the file system.
"""

from __future__ import annotations

import logging
import threading

log = logging.getLogger(__name__)

# Names that download managers, rsync, editors and copy tools use for files not yet complete.
IN_PROGRESS_SUFFIXES = (".part", ".tmp", ".crdownload")


def normalise_suffixes(suffixes: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """Lower-case the suffixes and give each a leading dot: `mp4` and `.MP4` both mean `.mp4`."""
    out = []
    for suffix in suffixes:
        suffix = suffix.strip().lower()
        if not suffix or suffix == ".":
            raise ValueError("a suffix must not be empty")
        if "/" in suffix or "\0" in suffix:
            raise ValueError(f"a suffix cannot contain '/' or NUL: {suffix!r}")
        out.append(suffix if suffix.startswith(".") else "." + suffix)
    return tuple(dict.fromkeys(out))


def is_hidden(part: str) -> bool:
    return part.startswith(".")


def is_candidate_file_name(file_name: str, suffixes: tuple[str, ...]) -> bool:
    """True when a file with this name (one path part) is an item, given its suffixes."""
    if file_name.startswith(".") or file_name.endswith("~"):
        return False
    lower = file_name.lower()
    if lower.endswith(IN_PROGRESS_SUFFIXES):
        return False
    if not lower.endswith(suffixes):
        return False
    return is_representable(file_name)


def is_representable(part: str) -> bool:
    """A name must survive JSON, URLs and line-based logs: file names that are not valid UTF-8
    (decoded by Python with surrogate escapes) or that break a line (a newline, a carriage
    return, any other line boundary), or hold a NUL, are not items - a name the listing shows
    is always one a client can fetch, and one line. (Tabs and other characters are data: they
    are served.)"""
    return name_problem(part) is None


def name_problem(part: str) -> str | None:
    """Why a name cannot be an item (`is_representable`): `not_utf8`, `nul` or
    `line_break`; None when it can."""
    if part.isascii() and part.isprintable():  # the usual name, decided without copies
        return None
    try:
        part.encode("utf-8")
    except UnicodeEncodeError:
        return "not_utf8"
    if "\0" in part:
        return "nul"
    if len(f"{part}x".splitlines()) != 1:
        return "line_break"
    return None


WHY = {
    "not_utf8": "is not valid UTF-8",
    "nul": "holds a NUL",
    "line_break": "breaks a line",
}
MOST_REMEMBERED = 100_000  # names said once each; past this many, said again (memory bounded)


class SkippedNames:
    """Names a source finds but cannot serve: each said once (escaped: never raw on a
    terminal or in a log line) and counted in `/metrics`
    (`ambassador_names_skipped_total{reason}`) - one bad name never stops a source, and is
    never dropped without a word."""

    def __init__(self, where: str) -> None:
        self.where = where
        self._seen: set[str | bytes] = set()
        self._lock = threading.Lock()

    def skip(self, name: str | bytes, reason: str) -> None:
        with self._lock:
            if name in self._seen:
                return
            if len(self._seen) >= MOST_REMEMBERED:
                self._seen.clear()
            self._seen.add(name)
        from .metrics import skipped_names_counter

        skipped_names_counter().labels(reason).inc()
        if isinstance(name, str) and reason == "not_utf8":
            name = name.encode("utf-8", "surrogateescape")
        log.warning("%s: not listed: %s - its name %s, so no client could ask for it; rename "
                    "it to list it", self.where, ascii(name), WHY[reason])  # fmt: skip

    def check(self, name: str) -> bool:
        """Whether `name` can be an item; one that cannot is skipped (said, counted)."""
        problem = name_problem(name)
        if problem is None:
            return True
        self.skip(name, problem)
        return False


def parent_of(name: str) -> str:
    head, _, _ = name.rpartition("/")
    return head
