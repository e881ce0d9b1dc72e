"""Patterns a user or a tenant gives, matched in time linear in the name: RE2, never Python's
backtracking engine.

What runs per item on a name an attacker may choose - `--group REGEX`, the globs of
`--priority`, `--limit`, `--rate`, `--weight`, a WorkQueue's `spec.group` and rules - must be
bounded: `re` backtracks, and `^(a+)+$` against `aaaa…!` (28-31 characters) held a whole
operator - every queue, and its `/healthz` - for about three minutes. RE2 (Google's engine, the
one Go's `regexp`, Kubernetes' CEL and Prometheus use; the `google-re2` wheel) runs every match
in time linear in the input, holding no state between matches; the price is the few Perl
features that cannot be matched that way (backreferences, lookaround), which a pattern that
uses them is refused for, in one line.

Globs are shell-style (`*` any run of characters, `/` included; `?` one; `[set]`, `[!set]`) and
match the whole name; `glob_regex` turns one into RE2's syntax (`fnmatch.translate` writes
lookaheads, which RE2 has not).
"""

from __future__ import annotations

import re
from typing import Protocol

import re2

from .errors import InputError

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a refused pattern is our one line, not RE2's log on stderr
_OPTIONS.dot_nl = True  # `.` (from `*`, `?`) takes a newline too, as fnmatch's does


class Match(Protocol):
    def group(self, index: int | str = 0) -> str | None: ...
    def groups(self) -> tuple[str | None, ...]: ...


class Pattern(Protocol):
    """What the callers use of a compiled pattern (RE2's, shaped as `re`'s)."""

    pattern: str
    groups: int

    def search(self, text: str) -> Match | None: ...
    def fullmatch(self, text: str) -> Match | None: ...


def compile_regex(text: str) -> Pattern:
    """`text` as a linear-time regular expression; `InputError` naming what RE2 refuses."""
    try:
        return re2.compile(text, _OPTIONS)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        hint = ""
        if re.search(r"\(\?[=!<]|\\[1-9]", text):
            hint = " - lookaround and backreferences are not taken (RE2: linear-time matching)"
        raise InputError(f"not a regular expression ({reason}){hint}: {text!r}") from None


def glob_regex(glob: str) -> str:
    """A shell-style glob as an RE2 expression matching exactly what `fnmatch` matches (the
    whole name): `*`, `?`, `[set]` with ranges and `!`, a `[` nothing closes taken as itself."""
    out, i, n = [], 0, len(glob)
    while i < n:
        char = glob[i]
        i += 1
        if char == "*":
            if not out or out[-1] != ".*":  # runs of * are one
                out.append(".*")
        elif char == "?":
            out.append(".")
        elif char == "[":
            close = _set_end(glob, i)
            if close < 0:  # no ]: the [ is itself (as fnmatch takes it)
                out.append(r"\[")
                continue
            out.append(_set_regex(glob, i, close))
            i = close + 1
        else:
            out.append(_literal(char))
    return "".join(out)


def _set_end(glob: str, start: int) -> int:
    """Where the [set] opened just before `start` closes (its `]`), -1 when it never does."""
    j = start
    if j < len(glob) and glob[j] == "!":
        j += 1
    if j < len(glob) and glob[j] == "]":  # a ] first in the set is itself
        j += 1
    return glob.find("]", j)


def _set_regex(glob: str, start: int, close: int) -> str:
    """The set `glob[start:close]` (after its `[`) as an RE2 class, read as fnmatch reads
    it: `!` first negates; `a-z` is a range where a `-` stands between two characters (not
    first, not last); a range whose ends are reversed is empty and dropped."""
    negate = glob[start] == "!" if start < close else False
    body_start = start + 1 if negate else start
    # fnmatch's reading: chunks split at the hyphens that make ranges
    chunks, i, k = [], body_start, body_start + 1
    while True:
        k = glob.find("-", k, close)
        if k < 0:
            break
        chunks.append(glob[i:k])
        i, k = k + 1, k + 3
    if glob[i:close]:
        chunks.append(glob[i:close])
    elif chunks:
        chunks[-1] += "-"
    for j in range(len(chunks) - 1, 0, -1):  # an empty range (z-a) leaves its ends' neighbours
        if chunks[j - 1][-1] > chunks[j][0]:
            chunks[j - 1] = chunks[j - 1][:-1] + chunks[j][1:]
            del chunks[j]
    members = []
    for j, chunk in enumerate(chunks):
        if j:
            members.append(f"{_literal(chunks[j - 1][-1])}-{_literal(chunk[0])}")
        inner = chunk[1 if j else 0 : len(chunk) - 1 if j < len(chunks) - 1 else len(chunk)]
        members.extend(_literal(c) for c in inner)
    if not members:
        return "." if negate else _NOTHING
    return f"[{'^' if negate else ''}{''.join(members)}]"


_NOTHING = r"[^\x00-\x{10FFFF}]"  # a class no character is in (RE2 has no (?!))


def _literal(char: str) -> str:
    """One character as RE2 reads it literally, in a class or outside one: a letter or digit
    as it is, ASCII punctuation after a backslash, anything else by its code point."""
    if char.isascii() and char.isalnum():
        return char
    if char.isascii() and char.isprintable() and not char.isspace():
        return "\\" + char
    return f"\\x{{{ord(char):X}}}"


def compile_globs(globs: list[str]) -> Pattern:
    """One pattern whose named group `g<i>` matches when `globs[i]` matches a whole name (the
    first in order that matches is the lowest `i` that took part)."""
    parts = "|".join(f"(?P<g{i}>{glob_regex(g)})" for i, g in enumerate(globs))
    return compile_regex(parts)


def first_glob(pattern: Pattern, name: str) -> int | None:
    """The index of the first glob of `compile_globs` that matches `name` whole, or None."""
    found = pattern.fullmatch(name)
    if found is None:
        return None
    for i, value in enumerate(found.groups()):
        if value is not None:
            return i
    return None
