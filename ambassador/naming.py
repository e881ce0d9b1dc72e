"""What counts as an item, and how an item's name maps to a path under the root.

An item is a regular file (never a symlink, never a directory) whose file name ends with one of
the configured suffixes, compared case-insensitively, that is not hidden and not a copy in
progress. Its *name* is its path relative to the root with `/` between parts; names contain `/`
only in recursive mode. A name is only ever produced from a directory listing of the root: the
server never turns a name it was *sent* into a path unless that name is in its own listing
(api.py), so `..`, encoded slashes, NUL and absolute paths cannot reach the file system.
"""

from __future__ import annotations

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
    return, any other line boundary) are not items - a name the listing shows is always one a
    client can fetch, and one line. (Tabs and other characters are data: they are served.)"""
    if part.isascii() and part.isprintable():  # the usual name, decided without copies
        return True
    try:
        part.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return len(f"{part}x".splitlines()) == 1


def parent_of(name: str) -> str:
    head, _, _ = name.rpartition("/")
    return head
