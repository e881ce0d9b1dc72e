"""A CycloneDX SBOM (JSON, spec 1.5) of a Helm chart: the chart itself and the container images
it deploys by default, read from its Chart.yaml and values.yaml.

    python .github/scripts/chart_sbom.py charts/workqueue > workqueue.cdx.json

Syft and the other scanners describe files and images; a chart is neither, and what a user of
the chart runs is its images - so these are its components, each with an OCI package URL. The
release workflow attests this file on the pushed chart with cosign; tests/release validates it
against the CycloneDX schema.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from urllib.parse import quote

import yaml


def image_refs(values: dict) -> list[tuple[str, str, str]]:
    """(role, repository, tag) of every image the chart's default values name."""
    refs = []
    image = values.get("image") or {}
    if image.get("repository"):
        refs.append(("manager and ambassador", image["repository"], str(image.get("tag", ""))))
    worker = (values.get("worker") or {}).get("image")
    if worker:
        repository, _, tag = worker.rpartition(":") if ":" in worker.rsplit("/", 1)[-1] else (
            worker, "", "")  # fmt: skip
        refs.append(("worker", repository, tag))
    return refs


def component(role: str, repository: str, tag: str) -> dict:
    name = repository.rsplit("/", 1)[-1]
    purl = f"pkg:oci/{name}?repository_url={quote(repository, safe='')}"
    if tag:
        purl += f"&tag={quote(tag, safe='')}"
    return {
        "type": "container",
        "bom-ref": purl,
        "name": repository,
        "version": tag,
        "purl": purl,
        "properties": [{"name": "kube-workqueue:role", "value": role}],
    }


def sbom(chart_dir: Path) -> dict:
    chart = yaml.safe_load((chart_dir / "Chart.yaml").read_text())
    values = yaml.safe_load((chart_dir / "values.yaml").read_text()) or {}
    components = [component(*ref) for ref in image_refs(values)]
    chart_ref = f"helm-chart:{chart['name']}@{chart['version']}"
    return {
        "bomFormat": "CycloneDX",
        "specVersion": "1.5",
        "version": 1,
        "metadata": {
            "component": {
                "type": "application",
                "bom-ref": chart_ref,
                "name": chart["name"],
                "version": str(chart["version"]),
                "description": chart.get("description", ""),
            },
        },
        "components": components,
        "dependencies": [
            {"ref": chart_ref, "dependsOn": [c["bom-ref"] for c in components]},
            *({"ref": c["bom-ref"], "dependsOn": []} for c in components),
        ],
    }


if __name__ == "__main__":
    if len(sys.argv) != 2 or not (Path(sys.argv[1]) / "Chart.yaml").is_file():
        print("usage: chart_sbom.py CHART_DIR (a folder with Chart.yaml)", file=sys.stderr)
        sys.exit(2)
    json.dump(sbom(Path(sys.argv[1])), sys.stdout, indent=2)
    sys.stdout.write("\n")
