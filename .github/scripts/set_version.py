"""Set the project's version everywhere it is written, from one command:

    python .github/scripts/set_version.py 0.2.0

pyproject.toml holds the version; a few files must say it too because their tools cannot read
pyproject.toml - the chart (`version`, `appVersion`, the default image tags in values.yaml and
in the Artifact Hub annotations, its README), the Dockerfiles' `ARG VERSION` default, the
Install page, and the changelog's newest heading (a new `## [X] - unreleased` section is
opened when it names another version). This script writes them all;
tests/architecture/test_one_version.py fails while any one disagrees. Each rewrite is anchored
on what the line says (never a bare search for the old number), and a file whose anchor is gone
is an error: nothing is half-set silently.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?$")
IMAGES = r"(ghcr\.io/kube-workqueue/[a-z0-9/-]+:)"


def rewrite(path: Path, rules: list[tuple[str, str]]) -> None:
    """Apply each (pattern, replacement) to the file (multi-line mode); each must match."""
    text = path.read_text()
    for pattern, replacement in rules:
        text, count = re.subn(pattern, replacement, text, flags=re.M)
        if not count:
            raise SystemExit(f"set_version: {path}: nothing matches {pattern!r}")
    path.write_text(text)


def set_version(root: Path, new: str) -> str:
    """Write `new` everywhere under the checkout at `root`; returns the version it replaced."""
    old = tomllib.loads((root / "pyproject.toml").read_text())["project"]["version"]
    old_minor = ".".join(old.split(".")[:2])
    new_minor = ".".join(new.split("-")[0].split(".")[:2])
    rewrite(root / "pyproject.toml", [(r'^version = "[^"]+"$', f'version = "{new}"')])
    chart = root / "charts" / "workqueue"
    rewrite(chart / "Chart.yaml", [
        (r"^version: \S+$", f"version: {new}"),
        (r'^appVersion: "[^"]+"$', f'appVersion: "{new}"'),
        (rf"^(\s+image: ){IMAGES}\S+$", rf"\g<1>\g<2>{new}"),
    ])  # fmt: skip
    rewrite(chart / "values.yaml", [
        (r'^(image:\n(?:  .*\n)*?  tag: )"[^"]+"$', rf'\g<1>"{new}"'),
        (rf"^(  image: ){IMAGES}\S+$", rf"\g<1>\g<2>{new}"),
    ])  # fmt: skip
    for dockerfile in sorted((root / "worker-images").glob("*/Dockerfile")):
        rewrite(dockerfile, [(r"^ARG VERSION=\S+$", f"ARG VERSION={new}")])
    rewrite(root / "docs" / "install.md", [
        (r"^workqueue \S+$", f"workqueue {new}"),  # what --version prints
        (r"--version \d\S*", f"--version {new}"),
        (rf"{IMAGES}{re.escape(old)}\b", rf"\g<1>{new}"),
        (rf"kube_workqueue-{re.escape(old)}-py3", f"kube_workqueue-{new}-py3"),
        (rf"kube-workqueue=={re.escape(old)}\b", f"kube-workqueue=={new}"),
        (rf"\(`{re.escape(old)}`\) and its minor\n\(`{re.escape(old_minor)}`\)",
         f"(`{new}`) and its minor\n(`{new_minor}`)"),
    ])  # fmt: skip
    rewrite(chart / "README.md", [
        (r"--version \d\S*", f"--version {new}"),
        (rf"{IMAGES}{re.escape(old)}\b", rf"\g<1>{new}"),
        (rf"^(\| `image\.repository`.*`ghcr\.io/kube-workqueue/workqueue`, `){re.escape(old)}`",
         rf"\g<1>{new}`"),
    ])  # fmt: skip
    changelog = root / "CHANGELOG.md"
    text = changelog.read_text()
    headings = re.findall(r"^## \[([^\]]+)\]", text, re.M)
    if not headings:
        raise SystemExit(f"set_version: {changelog}: no version heading")
    if headings[0] != new:
        first = re.search(r"^## \[", text, re.M).start()
        changelog.write_text(f"{text[:first]}## [{new}] - unreleased\n\n{text[first:]}")
    return old


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not SEMVER.match(argv[0]):
        print("usage: set_version.py X.Y.Z (a semantic version)", file=sys.stderr)
        return 2
    root = Path(__file__).resolve().parents[2]
    old = set_version(root, argv[0])
    print(f"{old} -> {argv[0]}: pyproject.toml, the chart, the Dockerfiles, docs/install.md, "
          "CHANGELOG.md")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
