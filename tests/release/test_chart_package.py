"""The chart as the release publishes it: `helm package` (the real Helm engine), the archive
linted with --strict and no finding at all, its Artifact Hub annotations true to the chart (the
images its values deploy, the CRDs of crds/, examples the CRD's schema accepts), and the
CycloneDX SBOM the release attests on it (.github/scripts/chart_sbom.py) valid and complete."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
import tomllib

import helm_python
import pytest
import yaml

from .conftest import REPO, VERSION, cyclonedx_errors

CHART = REPO / "charts" / "workqueue"
META = yaml.safe_load((CHART / "Chart.yaml").read_text())
ANNOTATIONS = META["annotations"]
VALUES = yaml.safe_load((CHART / "values.yaml").read_text())
CRDS = [yaml.safe_load(p.read_text()) for p in sorted((CHART / "crds").glob("*.yaml"))]


@pytest.fixture(scope="module")
def packaged(tmp_path_factory):
    return helm_python.package(CHART, destination=tmp_path_factory.mktemp("chart"))


def test_the_packaged_chart_lints_clean(packaged):
    assert packaged.endswith(f"/workqueue-{VERSION}.tgz")
    report = helm_python.lint(packaged, strict=True)
    assert report["errors"] == [] and report["messages"] == [], report
    with tarfile.open(packaged) as archive:
        names = set(archive.getnames())
    for needed in ("Chart.yaml", "values.yaml", "values.schema.json", "README.md",
                   "crds/workqueues.workqueue.dev.yaml", "templates/deployment.yaml"):  # fmt: skip
        assert f"workqueue/{needed}" in names, needed


def default_images() -> set[str]:
    return {f"{VALUES['image']['repository']}:{VALUES['image']['tag']}", VALUES["worker"]["image"]}


def test_artifact_hub_names_the_images_the_values_deploy_and_the_license():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert ANNOTATIONS["artifacthub.io/license"] == project["license"]
    images = yaml.safe_load(ANNOTATIONS["artifacthub.io/images"])
    assert {i["image"] for i in images} == default_images()
    for image in images:
        assert image["image"].endswith(f":{VERSION}")
        assert image["platforms"] == ["linux/amd64", "linux/arm64"]  # the release's matrix


def test_artifact_hub_names_every_crd_and_its_examples_fit_the_schema():
    listed = yaml.safe_load(ANNOTATIONS["artifacthub.io/crds"])
    served = {
        (crd["spec"]["names"]["kind"], version["name"], crd["metadata"]["name"])
        for crd in CRDS
        for version in crd["spec"]["versions"]
        if version["served"]
    }
    assert {(c["kind"], c["version"], c["name"]) for c in listed} == served
    assert all(c["displayName"] and c["description"] for c in listed)
    examples = yaml.safe_load(ANNOTATIONS["artifacthub.io/crdsExamples"])
    assert {e["kind"] for e in examples} == {c["kind"] for c in listed}
    import jsonschema

    for example in examples:
        crd = next(c for c in CRDS if c["spec"]["names"]["kind"] == example["kind"])
        group, version = example["apiVersion"].split("/")
        assert group == crd["spec"]["group"]
        schema = next(v for v in crd["spec"]["versions"] if v["name"] == version)
        jsonschema.validate(example, schema["schema"]["openAPIV3Schema"])
    # the same example is the one examples/ ships
    shipped = yaml.safe_load((REPO / "examples/workqueue/workqueue.yaml").read_text())
    assert shipped in examples


def test_artifact_hub_changes_are_of_known_kinds():
    changes = yaml.safe_load(ANNOTATIONS["artifacthub.io/changes"])
    kinds = {"added", "changed", "deprecated", "removed", "fixed", "security"}
    assert changes and all(c["kind"] in kinds and c["description"] for c in changes)


def test_the_chart_sbom_is_valid_cyclonedx_naming_the_chart_and_its_images(tmp_path):
    r = subprocess.run(
        [sys.executable, str(REPO / ".github/scripts/chart_sbom.py"), str(CHART)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert cyclonedx_errors(r.stdout, "1.5") == ""
    sbom = json.loads(r.stdout)
    assert sbom["metadata"]["component"]["name"] == "workqueue"
    assert sbom["metadata"]["component"]["version"] == VERSION
    named = {f"{c['name']}:{c['version']}" for c in sbom["components"]}
    assert named == default_images()
    assert all(c["purl"].startswith("pkg:oci/") for c in sbom["components"])
    wrong = subprocess.run([sys.executable, str(REPO / ".github/scripts/chart_sbom.py"),
                            str(tmp_path)], capture_output=True, text=True)  # fmt: skip
    assert wrong.returncode == 2 and len(wrong.stderr.splitlines()) == 1
