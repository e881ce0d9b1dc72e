"""A sorted list of item names held as one UTF-8 blob and an array of offsets.

A gunicorn worker serves the listing the publisher wrote (shared.py): NUL-separated, sorted
UTF-8. Held as a `list[str]` plus a `frozenset` for lookups, a name cost a worker about 140
bytes - 140 MB a worker at a million files. Held as the file's own bytes plus one 4- or 8-byte
offset per name, it costs the name's length plus the offset: about 25 bytes.

Order: the names are sorted as Python sorts `str` (by code point), and UTF-8 preserves code
point order byte for byte, so every search compares bytes and decodes nothing; only the names
a page returns are decoded.

The full listing's JSON array is built from the blob in one replace when no name needs
escaping in JSON (no `"`, `\\` or control character - the usual case), else by json.dumps.
It is not kept here: the API caches the whole response body once per version.
"""

from __future__ import annotations

import json
import re
from array import array
from itertools import accumulate

_NEEDS_ESCAPE = re.compile(rb'[\x01-\x1f"\\]')  # NUL is the separator, never in a name


class SortedNames:
    def __init__(self, blob: bytes = b"") -> None:
        """`blob`: sorted names, UTF-8, NUL-separated (what the publisher writes)."""
        self.blob = blob
        if not blob:
            self._starts = array("Q")
        else:
            lengths = map(len, blob.split(b"\0"))  # one pass in C; the parts are dropped
            self._starts = array("Q", accumulate((n + 1 for n in lengths), initial=0))
        # _starts[i] is where name i begins; _starts[-1] is one past the end (+1 for a NUL).

    def __len__(self) -> int:
        return max(0, len(self._starts) - 1)

    def _raw(self, i: int) -> bytes:
        return self.blob[self._starts[i] : self._starts[i + 1] - 1]

    def __getitem__(self, i: int) -> str:
        return self._raw(i).decode("utf-8")

    def slice(self, start: int, end: int) -> list[str]:
        """The names from `start` to `end` (not included), decoded."""
        if start >= end:
            return []
        chunk = self.blob[self._starts[start] : self._starts[end] - 1]
        return chunk.decode("utf-8").split("\0")

    def bisect_right(self, name: str) -> int:
        """How many names sort at or before `name`."""
        key = name.encode("utf-8", "surrogateescape")
        low, high = 0, len(self)
        while low < high:
            mid = (low + high) // 2
            if key < self._raw(mid):
                high = mid
            else:
                low = mid + 1
        return low

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        i = self.bisect_right(name)
        return i > 0 and self._raw(i - 1) == name.encode("utf-8", "surrogateescape")

    def as_set(self) -> frozenset[bytes]:
        """Every name as UTF-8 bytes (for comparing two versions)."""
        return frozenset(self.blob.split(b"\0")) if self.blob else frozenset()

    def added_lines(self) -> bytes:
        """Every name as a watch stream's ADDED event, one JSON line each (as `api.py` writes
        them), built in one replace when no name needs escaping."""
        if not self.blob:
            return b""
        if _NEEDS_ESCAPE.search(self.blob) is None:
            joint = b'"}\n{"type":"ADDED","item":"'
            return b'{"type":"ADDED","item":"' + self.blob.replace(b"\0", joint) + b'"}\n'
        return b"".join(
            json.dumps({"type": "ADDED", "item": n}, ensure_ascii=False,
                       separators=(",", ":")).encode() + b"\n"
            for n in self.slice(0, len(self))
        )  # fmt: skip

    def json_array(self) -> bytes:
        """The names as a JSON array (UTF-8, as `json.dumps(names, ensure_ascii=False)` with
        compact separators gives it)."""
        if not self.blob:
            return b"[]"
        if _NEEDS_ESCAPE.search(self.blob) is None:
            return b'["' + self.blob.replace(b"\0", b'","') + b'"]'
        names = self.slice(0, len(self))
        return json.dumps(names, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
