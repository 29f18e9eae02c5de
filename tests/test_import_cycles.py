"""No import cycle in dse/ nor in the families' packages (evaluators/, search_spaces/,
families/): the graph of their modules (grimp's, which import-linter reads) has no
strongly connected component of more than one module.

Every import is an edge: at the top of a module, inside a function (a deferred import only
hides a cycle from the interpreter) and under ``TYPE_CHECKING``. A cycle found is printed with
each of its imports and their lines.
"""

from __future__ import annotations

import grimp
import pytest


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("dse", "evaluators", "search_spaces", "families", cache_dir=None)


def import_cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm), each
    sorted, in the order found; a module importing itself is one too."""
    edges = {module: sorted(graph.find_modules_directly_imported_by(module))
             for module in sorted(graph.modules)}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(start: str) -> None:
        # iterative: a deep chain of imports must not exhaust Python's recursion limit
        work = [(start, iter(edges[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            module, successors = work[-1]
            for successor in successors:
                if successor not in edges:
                    continue
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(edges[successor])))
                    break
                if successor in on_stack:
                    low[module] = min(low[module], index[successor])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[module])
                if low[module] == index[module]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == module:
                            break
                    if len(component) > 1 or module in edges[module]:
                        found.append(sorted(component))

    for module in edges:
        if module not in index:
            visit(module)
    return found


def describe(graph: grimp.ImportGraph, cycle: list[str]) -> str:
    """A cycle's imports, one a line: importer -> imported (the lines of the importer)."""
    members = set(cycle)
    lines = []
    for importer in cycle:
        for imported in sorted(graph.find_modules_directly_imported_by(importer) & members):
            at = sorted(d["line_number"] for d in graph.get_import_details(
                importer=importer, imported=imported))
            lines.append(f"  {importer} -> {imported} (line {', '.join(map(str, at))})")
    return f"cycle of {len(cycle)} modules:\n" + "\n".join(lines)


def test_the_search_finds_a_cycle_hidden_in_a_function():
    graph = grimp.ImportGraph()
    for module in ("p", "p.a", "p.b", "p.c"):
        graph.add_module(module)
    graph.add_import(importer="p.a", imported="p.b", line_number=1, line_contents="import p.b")
    graph.add_import(importer="p.b", imported="p.a", line_number=9, line_contents="import p.a")
    graph.add_import(importer="p.b", imported="p.c", line_number=2, line_contents="import p.c")
    assert import_cycles(graph) == [["p.a", "p.b"]]


def test_no_import_cycle(graph):
    cycles = import_cycles(graph)
    assert cycles == [], "\n".join(describe(graph, c) for c in cycles)
