"""The workers' own word on what ran when: a worker that marks each start and end with the
time and the item's name, and the two questions the tenancy tests ask of the marks.

The worker is a shell script reading the item's name from $WORK_ITEM_FILE (as every worker
does; the names the tests use hold no quote or backslash), appending `start|end TIME NAME` lines
to a marks file (one `write` of a short line in append mode: lines from concurrent workers never
interleave), sleeping between - a shell, not Python: a suite that starts
hundreds of workers on two cores pays an interpreter's start-up for each.
"""

from __future__ import annotations

import shlex
from collections import Counter
from pathlib import Path

WORKER = """#!/bin/sh
name=$(sed -n 's/.*"name": *"\\([^"]*\\)".*/\\1/p' "$WORK_ITEM_FILE")
echo "start $(date +%s.%N) $name" >> {marks}
sleep {sleep}
echo "end $(date +%s.%N) $name" >> {marks}
"""


def marking_worker(folder: Path, sleep: float = 0.2) -> tuple[Path, Path]:
    """(the worker script, its marks file)."""
    marks = folder / "marks.txt"
    script = folder / "marking-worker.sh"
    script.write_text(WORKER.format(marks=shlex.quote(str(marks)), sleep=sleep))
    script.chmod(0o755)
    return script, marks


def read_marks(marks: Path) -> list[tuple[str, float, str]]:
    """(event, time, name) of every mark, in time order."""
    if not marks.exists():
        return []
    found = []
    for line in marks.read_text().splitlines():
        event, at, name = line.split(" ", 2)
        found.append((event, float(at), name))
    return sorted(found, key=lambda m: (m[1], m[0] == "start"))  # an end before a start


def most_at_once(marks, group_of) -> Counter:
    """Per group, the most of its items the workers ever ran at once."""
    running, most = Counter(), Counter()
    for event, _, name in marks:
        group = group_of(name)
        running[group] += 1 if event == "start" else -1
        most[group] = max(most[group], running[group])
    return most


def busiest_window(times: list[float], period: float) -> int:
    """The most of `times` within any window of `period` seconds (a window [t, t + period))."""
    times = sorted(times)
    most, first = 0, 0
    for last, at in enumerate(times):
        while at - times[first] >= period:
            first += 1
        most = max(most, last - first + 1)
    return most


def grouped_folder(root: Path, counts: dict[str, int], suffix: str = ".txt") -> Path:
    """`root` holding one subfolder per group (its items `NN{suffix}`): a tenant per folder,
    as `--group '^([^/]+)/'` with `--recursive` reads it."""
    for group, count in counts.items():
        (root / group).mkdir(parents=True)
        for i in range(count):
            (root / group / f"{i:02d}{suffix}").write_text(group)
    return root
