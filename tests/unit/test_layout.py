"""The shape rules of docs/development.md, enforced: every long source file is a reviewed exception, no import cycle.

A reader should be able to hold one module in their head, and a cycle means two modules cannot be read apart.
A file over ~400 lines is a smell, not a fault: it is split along a seam or listed in LONG_FILES with the reason it
is one concern (reviewed like code; a split made only to pass a line count is worse than the long file). Both rules
cover the three packages (services/agent, mcp-server, contract). TYPE_CHECKING and function-level imports count:
they are still two modules that need each other.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ROOTS = {
    "agent": REPO / "services/agent/src/agent",
    "agent_tools": REPO / "mcp-server/src/agent_tools",
    "agent_contract": REPO / "contract/src/agent_contract",
}
LONG_AT = 400  # lines: past this, look for a seam
# path → why it is one concern however long (none today)
LONG_FILES: dict[str, str] = {}


def sources() -> Iterator[tuple[str, Path]]:
    """(dotted module name, path) of every module; a package is named by its __init__."""
    for package, root in ROOTS.items():
        for path in sorted(root.rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            yield ".".join((package, *parts)), path


def imports(tree: ast.AST, module: str, is_package: bool) -> Iterator[str]:
    """Dotted names a module imports (relative imports resolved), `from a import b` as both a and a.b."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")[: len(module.split(".")) - node.level + (1 if is_package else 0)]
                base = ".".join([*anchor, base] if base else anchor)
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


def graph() -> dict[str, set[str]]:
    """Module → the modules of the three packages it imports (a package's own __init__ not counted)."""
    found = dict(sources())
    edges: dict[str, set[str]] = {}
    for module, path in found.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        targets = set(imports(tree, module, path.name == "__init__.py")) & found.keys()
        edges[module] = {t for t in targets if t != module and not module.startswith(f"{t}.")}
    return edges


def cycles(edges: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in edges.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.add(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def long_files() -> set[str]:
    return {
        str(path.relative_to(REPO))
        for _module, path in sources()
        if len(path.read_text(encoding="utf-8").splitlines()) > LONG_AT
    }


def test_every_long_source_file_is_a_reviewed_exception_with_its_reason() -> None:
    assert long_files() - LONG_FILES.keys() == set(), "split along a seam, or add it to LONG_FILES with a reason"
    assert all(reason.strip() for reason in LONG_FILES.values())


def test_the_list_of_long_files_names_only_long_files() -> None:
    """An entry outlives its reason once the file shrinks: the list says only what is true."""
    assert LONG_FILES.keys() - long_files() == set()


def test_no_import_cycle() -> None:
    assert cycles(graph()) == []


@pytest.mark.parametrize(
    ("edges", "expected"),
    [
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [frozenset({"a", "b", "c"})]),
        ({"a": {"b"}, "b": set()}, []),
    ],
)
def test_the_cycle_finder_sees_a_cycle(edges: dict[str, set[str]], expected: list[frozenset[str]]) -> None:
    assert cycles(edges) == expected
