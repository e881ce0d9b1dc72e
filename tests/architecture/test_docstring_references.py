"""A docstring that names a module or a name in one says something true: every backticked
`name.py` in the code's docstrings is a file of the project, and every backticked `module.Name`
whose module is one of ours names something that module defines (at its top, or in one of its
classes; a package's sub-module counts). A module renamed, a class removed or a function moved
without the prose that points at it fails here - prose that pointed at a `completion.py` that
never existed had lasted for months.

Not checked, on purpose: lower-case words after a module that are files or columns
(`manager.lock`, `items.version`), and the few references kept below with why.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "src" / "kube_workqueue"
CODE = tuple(PACKAGE / part for part in ("manager", "ambassador", "safelog"))
PROJECT = (
    *CODE,
    *(REPO / top for top in ("tests", "bench", "worker-images", "examples", "charts")),
)
FILE_SUFFIXES = {"json", "lock", "journal", "sock", "err", "yaml", "txt", "log", "sqlite3", "md"}
NOT_CODE = {
    "workqueue.sources": "an entry-point group's name, not a module",
    "items.version": "a column of the ledger's table `items`",
    "items.priority": "a column of the ledger's table `items`",
}


def code_files() -> list[Path]:
    return sorted(p for top in CODE for p in top.rglob("*.py"))


@cache
def project_file_names() -> frozenset[str]:
    names = set()
    for top in PROJECT:
        for path in top.rglob("*"):
            if path.is_file():
                names.add(path.name)
    return frozenset(names)


@cache
def modules_by_name() -> dict[str, list[Path]]:
    found: dict[str, list[Path]] = {}
    for path in code_files():
        stem = path.parent.name if path.name == "__init__.py" else path.stem
        found.setdefault(stem, []).append(path)
    return found


@cache
def defined_in(path: Path) -> frozenset[str]:
    """What a module defines at its top or in its classes (and, a package, its sub-modules)."""
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            if isinstance(node, ast.ClassDef):
                for member in node.body:
                    if isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        names.add(member.name)
                    elif isinstance(member, ast.AnnAssign) and isinstance(member.target, ast.Name):
                        names.add(member.target.id)
                    elif isinstance(member, ast.Assign):
                        names |= {t.id for t in member.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    if path.name == "__init__.py":
        names |= {p.stem for p in path.parent.glob("*.py")}
        names |= {p.parent.name for p in path.parent.glob("*/__init__.py")}
    return frozenset(names)


def references(path: Path):
    """(where, reference) for each backticked reference in the file's docstrings."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            for ref in re.findall(r"`([^`\s]+)`", ast.get_docstring(node) or ""):
                yield f"{path.relative_to(REPO)}:{getattr(node, 'lineno', 1)}", ref


def untrue(ref: str) -> bool:
    if ref in NOT_CODE:
        return False
    file = re.fullmatch(r"(?:[\w./-]+/)?(\w+\.py)", ref)
    if file:
        return file.group(1) not in project_file_names()
    named = re.fullmatch(r"([a-z_][a-z0-9_]*)\.([A-Za-z_]\w*)", ref)
    if not named or named.group(2) in FILE_SUFFIXES:
        return False
    module, name = named.groups()
    places = modules_by_name().get(module)
    if not places:  # not one of ours (`json.dumps`, `os.fork`)
        return False
    return not any(name in defined_in(place) for place in places)


def test_every_module_and_name_a_docstring_points_at_exists():
    wrong = [f"{where}: `{ref}`" for path in code_files() for where, ref in references(path)
             if untrue(ref)]  # fmt: skip
    assert wrong == [], "docstrings pointing at what is not there:\n" + "\n".join(wrong)


def test_the_check_sees_a_wrong_reference():
    assert untrue("completion.py")
    assert untrue("spawn.Child")
    assert not untrue("shim.py")
    assert not untrue("shim.read_status")
    assert not untrue("manager.lock")
