"""The wheel and the sdist the release publishes: built as the workflow builds them, accepted by
`twine check --strict`, claiming one top-level name, and described by a CycloneDX SBOM made
from an environment that installed the wheel (the workflow's `cyclonedx-py environment`)."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from email.parser import Parser

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from .conftest import REPO, SBOM_BIN, SDIST, VERSION, WHEEL, cyclonedx_errors

PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def test_the_build_makes_one_wheel_and_one_sdist_that_twine_accepts(release_dist):
    assert sorted(p.name for p in release_dist.iterdir()) == sorted([WHEEL, SDIST])
    r = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", *map(str, release_dist.iterdir())],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("PASSED") == 2, r.stdout


def test_the_wheel_claims_one_top_level_name_and_carries_its_data(release_dist):
    with zipfile.ZipFile(release_dist / WHEEL) as wheel:
        names = wheel.namelist()
        info = f"kube_workqueue-{VERSION}.dist-info"
        metadata = Parser().parsestr(wheel.read(f"{info}/METADATA").decode())
        entry_points = wheel.read(f"{info}/entry_points.txt").decode()
    assert {n.split("/")[0] for n in names} == {"kube_workqueue", info}
    # a namespace parent: no kube_workqueue/__init__.py, so the five parts are its only contents
    parts = {n.split("/")[1] for n in names if n.startswith("kube_workqueue/")}
    assert parts == {"manager", "ambassador", "safelog", "workers", "clouds"}
    assert "kube_workqueue/__init__.py" not in names
    for data in ("ambassador/openapi.json", "manager/views/dashboard/static/dashboard.js",
                 "manager/views/dashboard/static/dashboard.css"):  # fmt: skip
        assert f"kube_workqueue/{data}" in names, data
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    assert f"{info}/licenses/LICENSE" in names
    assert metadata["Name"] == "kube-workqueue" and metadata["Version"] == VERSION
    assert metadata["License-Expression"] == PROJECT["license"]
    assert metadata["Requires-Python"] == PROJECT["requires-python"]
    for script, target in PROJECT["scripts"].items():
        assert f"{script} = {target}" in entry_points


def test_the_sdist_holds_the_source_and_nothing_of_the_tests(release_dist):
    with tarfile.open(release_dist / SDIST) as sdist:
        names = {n.split("/", 1)[1] for n in sdist.getnames() if "/" in n}
    code = ("manager/cli/__init__.py", "ambassador/openapi.json", "workers/thumbnail.py")
    for needed in ("pyproject.toml", "README.md", "LICENSE",
                   *(f"src/kube_workqueue/{part}" for part in code)):  # fmt: skip
        assert needed in names, needed
    assert "setup.py" not in names  # the src layout needs no mapping
    assert not [n for n in names if n.startswith(("tests/", "bench/", ".github/"))]


def test_an_sbom_of_the_installed_wheel_names_it_and_what_it_pulled_in(installed, outside):
    """The release's SBOM step: CycloneDX JSON of an environment holding the wheel, valid
    against the CycloneDX schema, naming kube-workqueue and each runtime dependency. Checked
    here by the strict validator, which refuses all the default check does and more: the
    command's own check is left out (`--no-validate`), the same document validated twice -
    5 s of CPU, most of it parsing each reference's IRI."""
    sbom = outside / "kube_workqueue.cdx.json"
    cyclonedx = SBOM_BIN / "cyclonedx-py"
    r = subprocess.run(
        [str(cyclonedx), "environment", str(installed.venv), "--of", "JSON", "--sv", "1.6",
         "--output-reproducible", "--no-validate", "-o", str(sbom)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    text = sbom.read_text()
    assert cyclonedx_errors(text, "1.6") == ""
    document = json.loads(text)
    components = {canonicalize_name(c["name"]): c for c in document["components"]}
    ours = components["kube-workqueue"]
    assert ours["version"] == VERSION
    assert [lic["license"]["id"] for lic in ours["licenses"]] == [PROJECT["license"]]
    # installed from the file just built (no index yet, so no purl): the SBOM says which
    assert any(ref["url"].endswith(f"/{WHEEL}") for ref in ours["externalReferences"])
    for dependency in PROJECT["dependencies"]:
        assert canonicalize_name(Requirement(dependency).name) in components, dependency
