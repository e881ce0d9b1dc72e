"""The workers' own word on what ran when: a worker that marks each start and end with the
time and the item's name, and the two questions the tenancy tests ask of the marks.

The worker is a Python script reading the item from $WORK_ITEM_FILE (as every worker does),
appending `start|end TIME NAME` lines to a marks file (one `write` of a short line in append
mode: lines from concurrent workers never interleave), sleeping $SLEEP seconds between.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

WORKER = """#!{python}
import json, os, time
name = json.load(open(os.environ["WORK_ITEM_FILE"]))["name"]
def mark(event):
    fd = os.open({marks!r}, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(fd, f"{{event}} {{time.time():.6f}} {{name}}\\n".encode())
    os.close(fd)
mark("start")
time.sleep(float(os.environ.get("SLEEP", {sleep!r})))
mark("end")
"""


def marking_worker(folder: Path, sleep: float = 0.2) -> tuple[Path, Path]:
    """(the worker script, its marks file)."""
    marks = folder / "marks.txt"
    script = folder / "marking-worker.py"
    script.write_text(WORKER.format(python=sys.executable, marks=str(marks), sleep=str(sleep)))
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
