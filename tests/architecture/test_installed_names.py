"""What the wheel installs claims one top-level name, `kube_workqueue`, and the checkout is that
package (src/kube_workqueue/: manager/, ambassador/, safelog/, workers/), so every import of
them - in the code, the tests, the bench, the examples and the docs' hook - names them through
it or relatively. A bare `manager` import written by habit from the layout before would find
nothing in a checkout or in the wheel, or worse another distribution's `manager`: this test is
what stops it; the standalone wheel test (tests/release) proves the installed layout itself.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TOPS = ("manager", "ambassador", "safelog", "workers", "clouds")
SCANNED = (*(f"src/kube_workqueue/{top}" for top in TOPS), "tests", "bench", "examples", "docs")


def python_files() -> list[Path]:
    return sorted(
        p for top in SCANNED for p in (REPO / top).rglob("*.py") if ".venv" not in p.parts
    )


def bare_imports(path: Path) -> list[str]:
    """Each import of a checkout's top-level package by its bare name, as "file:line name"."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found += [f"{path.name}:{node.lineno} {n}" for n in names
                  if n.split(".")[0] in TOPS]  # fmt: skip
    return found


def test_the_project_is_imported_through_its_one_installed_name():
    files = python_files()
    assert len(files) > 300  # the scan found the tree
    bad = [line for path in files for line in bare_imports(path)]
    assert not bad, "import these through kube_workqueue.<package>:\n" + "\n".join(bad)


def test_the_scan_sees_a_bare_import(tmp_path):
    written = tmp_path / "x.py"
    written.write_text(
        "import os\nfrom manager.workqueue import Queue\nimport ambassador.app\n"
        "from kube_workqueue.manager import cli\nfrom .sibling import x\n"
    )
    assert bare_imports(written) == ["x.py:2 manager.workqueue", "x.py:3 ambassador.app"]
