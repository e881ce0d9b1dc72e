"""The manager is put together in one place (`manager.runtime.wiring`), each part after what it
is handed: a lambda there reads only names already bound above it, or attributes the
`Manager` sets in its `__init__` - never a part that does not exist yet - and the `Manager`
builds no part itself."""

from __future__ import annotations

import ast
import builtins
from pathlib import Path

RUNTIME = Path(__file__).resolve().parents[2] / "src" / "kube_workqueue" / "manager" / "runtime"


def _function(tree: ast.Module, name: str) -> ast.FunctionDef:
    return next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name)


def _manager_state() -> set[str]:
    """The attributes `Manager.__init__` sets."""
    init = _function(ast.parse((RUNTIME / "runner.py").read_text()), "__init__")
    return {
        target.attr
        for node in ast.walk(init)
        for target in (getattr(node, "targets", None) or [getattr(node, "target", None)])
        if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
        and target.value.id == "self"
    }  # fmt: skip


def _bound_before(function: ast.FunctionDef, line: int) -> set[str]:
    names = {a.arg for a in function.args.args + function.args.kwonlyargs}
    for node in ast.walk(function):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and node.lineno < line:
            names.add(node.id)
    return names


def test_a_lambda_in_the_wiring_reads_only_what_exists_already():
    tree = ast.parse((RUNTIME / "wiring.py").read_text())
    state = _manager_state()
    for name in ("wire", "_metrics"):
        function = _function(tree, name)
        for lam in (n for n in ast.walk(function) if isinstance(n, ast.Lambda)):
            bound = _bound_before(function, lam.lineno) | {a.arg for a in lam.args.args}
            for node in ast.walk(lam.body):
                if isinstance(node, ast.Name) and node.id not in dir(builtins):
                    assert node.id in bound, f"wiring.py:{lam.lineno}: {node.id} is not built yet"
                if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                        and node.value.id == "manager"):  # fmt: skip
                    assert node.attr in state, (
                        f"wiring.py:{lam.lineno}: manager.{node.attr} is a part, not yet the "
                        "manager's: hand the part itself"
                    )


def test_the_manager_builds_no_part_itself():
    init = _function(ast.parse((RUNTIME / "runner.py").read_text()), "__init__")
    lambdas = [n.lineno for n in ast.walk(init) if isinstance(n, ast.Lambda)]
    assert lambdas == [], f"runner.py: lambdas in Manager.__init__ at lines {lambdas}"
    built = {
        node.func.id
        for node in ast.walk(init)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    }
    # its own state only: a clock's window and an event, locks
    assert built <= {"SlidingWindow"}, built
