"""Every package whose docstring maps its modules (three or more `name.py` named) names each of
them, and names none that is gone: a module added, moved or removed without its map fails here.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def mapped(init: Path) -> set[str] | None:
    doc = ast.get_docstring(ast.parse(init.read_text())) or ""
    named = set(re.findall(r"\b([a-z0-9_]+)\.py\b", doc))
    return named if len(named) >= 3 else None


INITS = sorted(
    p
    for top in ("manager", "ambassador", "safelog")
    for p in (REPO / "src" / "kube_workqueue" / top).rglob("__init__.py")
)
MAPS = [p for p in INITS if mapped(p) is not None]


@pytest.mark.parametrize("init", MAPS, ids=lambda p: str(p.parent.relative_to(REPO)))
def test_a_package_map_names_every_module_and_no_other(init):
    named = mapped(init)
    folder = init.parent
    modules = {p.stem for p in folder.glob("*.py") if p.stem != "__init__"}
    doc = ast.get_docstring(ast.parse(init.read_text())) or ""
    packages = {p.name for p in folder.iterdir() if (p / "__init__.py").exists()}
    assert sorted(modules - named) == [], "modules the map leaves out"
    assert sorted(p for p in packages if f"{p}/" not in doc) == [], "sub-packages left out"
    assert sorted(named - modules) == [], "modules the map names that are not here"


def test_the_maps_that_exist_are_checked():
    assert len(MAPS) >= 7
