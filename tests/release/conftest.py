"""What a release publishes, made here the way the release workflow makes it.

`release_dist` builds the wheel and the sdist once per run - from a copy of the checkout's
files (git's tracked and not-ignored ones, as a clean clone has them, so the build writes
nothing into the checkout), sdist first and the wheel from the unpacked sdist (what
`python -m build` does: a file the sdist forgets fails here). No build isolation: the test
extra holds the build backend, so nothing is downloaded at test time.

`installed` is a clean virtual environment outside the repository with that wheel installed
(and its `thumbnailer` extra, for ffmpeg): commands from it run with a PATH of the venv and the
system alone, no PYTHONPATH, in a folder outside the checkout - a machine without the
repository, as far as Python can tell.

Both are made once for the whole run: with xdist, the first worker to need one builds it under
a lock in the workers' shared temporary folder and the others wait and reuse it.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tomllib
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.e2e.conftest import ffmpeg_env, sample_videos  # noqa: F401  (fixtures)

REPO = Path(__file__).resolve().parents[2]
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
WHEEL = f"kube_workqueue-{VERSION}-py3-none-any.whl"
SDIST = f"kube_workqueue-{VERSION}.tar.gz"
# cyclonedx-bom's own environment (the Makefile says why it is not the project's)
SBOM_BIN = REPO / ".venv-sbom" / "bin"


def cyclonedx_errors(document: str, schema_version: str) -> str:
    """What CycloneDX's strict JSON validator finds wrong with `document` against the schema of
    `schema_version` ("1.6"), run in .venv-sbom; "" when it is valid."""
    assert (SBOM_BIN / "python").exists(), "run `make test`: it makes .venv-sbom"
    check = (
        "import sys; from cyclonedx.schema import SchemaVersion; "
        "from cyclonedx.validation.json import JsonStrictValidator; "
        f"found = JsonStrictValidator(SchemaVersion.V{schema_version.replace('.', '_')})"
        ".validate_str(sys.stdin.read()); print(found or '', end='')"
    )
    done = subprocess.run([str(SBOM_BIN / "python"), "-c", check], input=document,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


@contextmanager
def _locked(path: Path):
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def shared_dir(tmp_path_factory) -> Path:
    """A folder every xdist worker of this run sees (the session's own without xdist)."""
    run_id = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if not run_id:
        return tmp_path_factory.getbasetemp()
    shared = tmp_path_factory.getbasetemp().parent / f"release-{run_id}"
    shared.mkdir(exist_ok=True)
    return shared


def checkout_files() -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO, capture_output=True, check=True,
    ).stdout.decode()  # fmt: skip
    return [name for name in listed.split("\0") if name and os.path.lexists(REPO / name)]


def copy_checkout(dest: Path) -> None:
    for name in checkout_files():
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, target, follow_symlinks=False)


@pytest.fixture(scope="session")
def release_dist(shared_dir) -> Path:
    """The folder with the wheel and the sdist of this version (nothing else in it)."""
    dist = shared_dir / "dist"
    with _locked(shared_dir / "dist.lock"):
        if not (shared_dir / "dist.done").exists():
            shutil.rmtree(dist, ignore_errors=True)
            source = shared_dir / "source"
            shutil.rmtree(source, ignore_errors=True)
            copy_checkout(source)
            build = [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(dist)]
            r = subprocess.run([*build, str(source)], capture_output=True, text=True,
                               timeout=300)  # fmt: skip
            assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
            (shared_dir / "dist.done").touch()
    return dist


class Installed:
    """A clean venv with the wheel installed; `run` starts one of its commands outside the
    repository, with nothing of the test environment inherited but HOME and the locale."""

    def __init__(self, venv: Path, home: Path) -> None:
        self.venv = venv
        self.bin = venv / "bin"
        self.home = home

    def env(self, **extra: str) -> dict[str, str]:
        return {
            "PATH": f"{self.bin}{os.pathsep}/usr/local/bin{os.pathsep}/usr/bin{os.pathsep}/bin",
            "HOME": os.environ.get("HOME", str(self.home)),
            "LANG": "C.UTF-8",
            **extra,
        }

    def run(self, *argv, cwd: Path, timeout: float = 120, **extra_env: str):
        return subprocess.run(
            [str(a) for a in argv], cwd=cwd, env=self.env(**extra_env), capture_output=True,
            text=True, timeout=timeout,
        )  # fmt: skip

    def spawn(self, *argv, cwd: Path, **extra_env: str) -> subprocess.Popen:
        return subprocess.Popen(
            [str(a) for a in argv], cwd=cwd, env=self.env(**extra_env),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip


@pytest.fixture(scope="session")
def installed(release_dist, shared_dir) -> Installed:
    venv = shared_dir / "clean-venv"
    with _locked(shared_dir / "venv.lock"):
        if not (shared_dir / "venv.done").exists():
            shutil.rmtree(venv, ignore_errors=True)
            uv = Path(sys.executable).parent / "uv"
            base = getattr(sys, "_base_executable", sys.executable)
            for argv in (
                [uv, "venv", "--quiet", "--python", base, venv],
                [uv, "pip", "install", "--quiet", "--python", venv / "bin" / "python",
                 f"{release_dist / WHEEL}[thumbnailer]"],
            ):  # fmt: skip
                env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
                r = subprocess.run([str(a) for a in argv], capture_output=True, text=True,
                                   timeout=600, env=env)  # fmt: skip
                assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
            (shared_dir / "venv.done").touch()
    return Installed(venv, shared_dir)


@pytest.fixture
def outside(tmp_path) -> Path:
    """A working folder outside the repository."""
    assert REPO not in tmp_path.parents
    return tmp_path
