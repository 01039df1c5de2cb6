"""The package's shape: no module of ``arcs`` imports, however indirectly, a module that imports it.

A cycle makes the import order decide what works (a name used before its module has finished
loading) and ties the modules of one feature to another's. Imports only for type checking
(``if TYPE_CHECKING:``) never run, so they do not count; imports inside functions do.
"""

from __future__ import annotations

import grimp
import pytest


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("arcs", exclude_type_checking_imports=True)


def import_cycles(graph: grimp.ImportGraph) -> list[tuple[str, ...]]:
    """One shortest cycle through each import that closes one, as the chain of modules it passes."""
    cycles = set()
    for module in graph.modules:
        for imported in graph.find_modules_directly_imported_by(module) - {module}:
            back = graph.find_shortest_chain(importer=imported, imported=module)
            if back is not None:
                cycle = (module, *back)
                start = cycle.index(min(cycle[:-1]))  # the same cycle found from any of its modules once
                cycles.add((*cycle[start:-1], *cycle[:start], cycle[start]))
    return sorted(cycles)


def test_no_module_of_arcs_imports_itself_through_others(graph: grimp.ImportGraph) -> None:
    cycles = import_cycles(graph)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(cycle) for cycle in cycles)


def test_a_cycle_is_found_when_there_is_one() -> None:
    graph = grimp.build_graph("arcs", exclude_type_checking_imports=True)
    graph.add_import(importer="arcs.errors", imported="arcs.runtime")
    assert any({"arcs.errors", "arcs.runtime"} <= set(cycle) for cycle in import_cycles(graph))
