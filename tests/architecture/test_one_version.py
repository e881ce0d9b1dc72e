"""One version, written once (`pyproject.toml`), and every place that says it agrees: the
command's `--version`, the chart's `version` and `appVersion`, the newest heading of
CHANGELOG.md."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]


def test_the_version_is_the_same_everywhere():
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    chart = yaml.safe_load((REPO / "charts/workqueue/Chart.yaml").read_text())
    assert chart["version"] == version and chart["appVersion"] == version
    shown = subprocess.run([sys.executable, "-m", "kube_workqueue.manager.cli", "--version"],
                           capture_output=True, text=True, timeout=60)  # fmt: skip
    assert shown.stdout.strip() == f"workqueue {version}"
    headings = re.findall(r"^## \[([^\]]+)\]", (REPO / "CHANGELOG.md").read_text(), re.M)
    assert headings and headings[0] == version


def test_the_changelog_keeps_its_form():
    text = (REPO / "CHANGELOG.md").read_text()
    assert text.startswith("# Changelog\n") and "keepachangelog.com" in text
    for block in re.split(r"^## ", text, flags=re.M)[1:]:
        assert re.match(r"\[[0-9]+\.[0-9]+\.[0-9]+\] - (unreleased|\d{4}-\d{2}-\d{2})\n", block)
        sections = re.findall(r"^### (\w+)", block, re.M)
        assert set(sections) <= {"Added", "Changed", "Deprecated", "Removed", "Fixed",
                                 "Security", "Upgrading"}, sections  # fmt: skip
