"""The chart README's tables of values say what `values.yaml` holds: every value a table names
is one the chart has, and every top-level value is in a table - a value renamed or removed
without its line, or added without one, fails here. (A row names a value by its path, and
`.key` after it for a sibling: `serviceMonitor.enabled`, `.interval`.)"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

CHART = Path(__file__).resolve().parents[2] / "charts" / "workqueue"
VALUES = yaml.safe_load((CHART / "values.yaml").read_text())


def named_in_tables(text: str) -> list[str]:
    """The value paths of the rows of every table headed `| value | default | ...`, and of
    the sections a value heads (`## Where the items are: `source.type``)."""
    paths, in_table = [], False
    for line in text.splitlines():
        if line.startswith("## "):
            paths += re.findall(r"`([a-zA-Z][\w.]*)`", line)
        if line.startswith("| value | default |"):
            in_table = True
            continue
        if not line.startswith("|"):
            in_table = False
        if not in_table or line.startswith("|---"):
            continue
        parent = ""
        for span in re.findall(r"`([^`]+)`", line.split(" | ")[0]):
            path = parent + span if span.startswith(".") else span
            parent = path.rsplit(".", 1)[0] if "." in path else ""
            paths.append(path)
    return paths


def has(path: str) -> bool:
    node = VALUES
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def test_every_value_a_table_names_is_in_values_yaml():
    paths = named_in_tables((CHART / "README.md").read_text())
    assert len(paths) > 50  # the tables were found
    assert [p for p in paths if not has(p)] == []


def test_every_top_level_value_is_in_a_table():
    paths = named_in_tables((CHART / "README.md").read_text())
    missing = [key for key in VALUES if not any(p == key or p.startswith(f"{key}.") for p in paths)]
    assert missing == [], "values with no line in the README's tables"


def test_the_check_reads_siblings_and_sees_a_wrong_name():
    text = (
        "| value | default | what |\n|---|---|---|\n| `serviceMonitor.enabled`, `.nope` | x | y |\n"
    )
    assert named_in_tables(text) == ["serviceMonitor.enabled", "serviceMonitor.nope"]
    assert not has("serviceMonitor.nope") and has("serviceMonitor.enabled")
