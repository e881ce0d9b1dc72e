"""One version, set in one place (`pyproject.toml`, by `.github/scripts/set_version.py`), and
every place that must say it agrees: the command's `--version`, the chart's `version` and
`appVersion`, the images the chart deploys by default (and names to Artifact Hub), the
Dockerfiles' `ARG VERSION` (the images' label), the Install page, the newest heading of
CHANGELOG.md. The script is run on a copy of those files and must move every one of them."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
SCRIPT = Path(".github/scripts/set_version.py")


def versions_said(root: Path) -> dict[str, set[str]]:
    """What version each place under the checkout `root` says (a place saying two is wrong)."""
    said: dict[str, set[str]] = {}

    def say(place: str, *versions: str) -> None:
        said.setdefault(place, set()).update(versions)

    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    say("pyproject.toml", project["version"])
    chart = yaml.safe_load((root / "charts/workqueue/Chart.yaml").read_text())
    say("Chart.yaml version", str(chart["version"]))
    say("Chart.yaml appVersion", str(chart["appVersion"]))
    for image in yaml.safe_load(chart["annotations"]["artifacthub.io/images"]):
        say("Chart.yaml artifacthub.io/images", image["image"].rsplit(":", 1)[1])
    values = yaml.safe_load((root / "charts/workqueue/values.yaml").read_text())
    say("values.yaml image.tag", values["image"]["tag"])
    say("values.yaml worker.image", values["worker"]["image"].rsplit(":", 1)[1])
    for dockerfile in sorted(root.glob("worker-images/*/Dockerfile")):
        arg = re.findall(r"^ARG VERSION=(\S+)$", dockerfile.read_text(), re.M)
        say(f"{dockerfile.relative_to(root)}", *arg)
    install = (root / "docs/install.md").read_text()
    say("docs/install.md --version", *re.findall(r"--version (\d\S*)", install))
    say("docs/install.md shown version", *re.findall(r"^workqueue (\d\S*)$", install, re.M))
    say("docs/install.md images", *re.findall(r"ghcr\.io/kube-workqueue/[\w/-]+:(\d\S*?)\b[` ]",
                                              install))  # fmt: skip
    readme = (root / "charts/workqueue/README.md").read_text()
    say("charts/workqueue/README.md --version", *re.findall(r"--version (\d\S*)", readme))
    say("charts/workqueue/README.md images",
        *re.findall(r"ghcr\.io/kube-workqueue/[\w/-]+:(\d\S*?)\b[` ]", readme),
        *re.findall(r"`ghcr\.io/kube-workqueue/workqueue`, `([^`]+)`", readme))  # fmt: skip
    headings = re.findall(r"^## \[([^\]]+)\]", (root / "CHANGELOG.md").read_text(), re.M)
    say("CHANGELOG.md newest heading", headings[0] if headings else "none")
    return said


def test_the_version_is_the_same_everywhere():
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    said = versions_said(REPO)
    assert {place: {version} for place in said} == said
    assert len([p for p in said if p.startswith("worker-images/")]) >= 4
    shown = subprocess.run([sys.executable, "-m", "kube_workqueue.manager.cli", "--version"],
                           capture_output=True, text=True, timeout=60)  # fmt: skip
    assert shown.stdout.strip() == f"workqueue {version}"


def test_set_version_moves_every_place(tmp_path):
    chart = Path("charts/workqueue")
    files = [SCRIPT, Path("pyproject.toml"), Path("CHANGELOG.md"), Path("docs/install.md"),
             chart / "Chart.yaml", chart / "values.yaml", chart / "README.md",
             *(p.relative_to(REPO) for p in REPO.glob("worker-images/*/Dockerfile"))]  # fmt: skip
    for name in files:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / name, tmp_path / name)
    old = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    r = subprocess.run([sys.executable, str(tmp_path / SCRIPT), "12.34.5"], capture_output=True,
                       text=True, timeout=60)  # fmt: skip
    assert r.returncode == 0, r.stderr
    said = versions_said(tmp_path)
    assert {place: {"12.34.5"} for place in said} == said
    install = (tmp_path / "docs/install.md").read_text()
    assert old not in install and "(`12.34`)" in install
    changelog = (tmp_path / "CHANGELOG.md").read_text()
    assert re.findall(r"^## \[([^\]]+)\] - (\S+)", changelog, re.M)[:2] == [
        ("12.34.5", "unreleased"), (old, re.search(rf"^## \[{re.escape(old)}\] - (\S+)",
                                                   changelog, re.M).group(1))]  # fmt: skip
    again = subprocess.run([sys.executable, str(tmp_path / SCRIPT), "12.34.5"],
                           capture_output=True, text=True, timeout=60)  # fmt: skip
    assert again.returncode == 0 and (tmp_path / "CHANGELOG.md").read_text() == changelog
    bad = subprocess.run([sys.executable, str(tmp_path / SCRIPT), "v1.2"], capture_output=True,
                         text=True, timeout=60)  # fmt: skip
    assert bad.returncode == 2 and len(bad.stderr.splitlines()) == 1


def test_the_changelog_keeps_its_form():
    text = (REPO / "CHANGELOG.md").read_text()
    assert text.startswith("# Changelog\n") and "keepachangelog.com" in text
    for block in re.split(r"^## ", text, flags=re.M)[1:]:
        assert re.match(r"\[[0-9]+\.[0-9]+\.[0-9]+\] - (unreleased|\d{4}-\d{2}-\d{2})\n", block)
        sections = re.findall(r"^### (\w+)", block, re.M)
        assert set(sections) <= {"Added", "Changed", "Deprecated", "Removed", "Fixed",
                                 "Security", "Upgrading"}, sections  # fmt: skip
