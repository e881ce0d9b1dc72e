"""The import graph has no cycle: no module of `manager` or `ambassador` imports, directly or
through others, a module that imports it back. (The layers themselves are import-linter's
contracts in pyproject.toml, checked by `lint-imports` in `make test`.)"""

from __future__ import annotations

import grimp


def strongly_connected(graph) -> list[set[str]]:
    """Tarjan's algorithm over the project's modules; components of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[set[str]] = []
    counter = [0]

    def visit(module: str) -> None:
        index[module] = low[module] = counter[0]
        counter[0] += 1
        stack.append(module)
        on_stack.add(module)
        for other in graph.find_modules_directly_imported_by(module):
            if other not in graph.modules:
                continue
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in on_stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(component)

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return found


def test_no_cycles_in_the_import_graph():
    graph = grimp.build_graph(
        "kube_workqueue.manager", "kube_workqueue.ambassador", "kube_workqueue.safelog"
    )
    assert len(graph.modules) > 150  # the build found the tree
    assert strongly_connected(graph) == []


def test_the_check_sees_a_cycle_when_there_is_one():
    graph = grimp.ImportGraph()
    for name in ("a", "a.x", "a.y", "a.z"):
        graph.add_module(name)
    graph.add_import(importer="a.x", imported="a.y")
    graph.add_import(importer="a.y", imported="a.x")
    graph.add_import(importer="a.z", imported="a.x")
    assert strongly_connected(graph) == [{"a.x", "a.y"}]
