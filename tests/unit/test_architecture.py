"""The layer map of docs/architecture.md, enforced: a module importing across a forbidden boundary fails here."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
AGENT = REPO / "services/agent/src/agent"
CORE = frozenset({"__init__", "__version__"})  # and every other top-level module but mcp_client and __main__
# layer → the layers it may import (agent_contract is open to every layer and is checked on its own).
ALLOWED: dict[str, frozenset[str]] = {
    "core": frozenset(),
    "backends": frozenset({"core"}),
    "mcp_client": frozenset({"core"}),
    "security": frozenset({"core"}),
    "queue": frozenset({"core", "backends"}),
    "checks": frozenset({"core", "backends"}),  # judges a finished answer; knows nothing of the loop
    "loop": frozenset({"core", "backends", "mcp_client", "security", "checks"}),
    "api": frozenset({"core", "backends", "mcp_client", "security", "queue", "checks", "loop"}),
    "eval": frozenset({"core", "mcp_client"}),
    "local": frozenset({"core", "backends", "security", "api"}),  # local-agent: checks, then serves the api
    "__main__": frozenset({"core", "api"}),  # agent-api's entry point: starts the app
}


def layer_of(module: str) -> str | None:
    """The agent layer of a dotted module name; None outside the agent package."""
    parts = module.split(".")
    if parts[0] != "agent":
        return None
    if len(parts) == 1 or parts[1] in CORE:
        return "core"
    if not (AGENT / parts[1]).is_dir() and parts[1] not in ALLOWED:  # a top-level module: core
        return "core"
    return parts[1]


def imported(tree: ast.AST) -> Iterator[str]:
    """Every module an AST imports, `from agent import x` read as agent.x (function-level imports too)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module
            if node.module == "agent":
                yield from (f"agent.{alias.name}" for alias in node.names)


def modules(root: Path, package: str) -> Iterator[tuple[str, ast.AST]]:
    for path in sorted(root.rglob("*.py")):
        dotted = ".".join((package, *path.relative_to(root).with_suffix("").parts))
        yield dotted, ast.parse(path.read_text(encoding="utf-8"))


def violations() -> list[str]:
    found = []
    for module, tree in modules(AGENT, "agent"):
        source = layer_of(module)
        assert source in ALLOWED, f"{module}: layer {source!r} is not on the map in docs/architecture.md"
        for target in {layer_of(name) for name in imported(tree)} - {None, source}:
            if target not in ALLOWED[source]:
                found.append(f"{module} ({source}) imports {target}")
    return sorted(found)


def test_the_agent_package_follows_the_layer_map() -> None:
    assert violations() == []


@pytest.mark.parametrize(
    ("root", "package", "forbidden"),
    [
        (REPO / "contract/src/agent_contract", "agent_contract", ("agent", "agent_tools")),
        (REPO / "mcp-server/src/agent_tools", "agent_tools", ("agent",)),
    ],
)
def test_the_contract_and_the_tool_server_import_no_other_service(
    root: Path, package: str, forbidden: tuple[str, ...]
) -> None:
    bad = [
        f"{module} imports {name}"
        for module, tree in modules(root, package)
        for name in imported(tree)
        if name.split(".")[0] in forbidden
    ]
    assert bad == []


def test_the_check_sees_a_forbidden_import(monkeypatch: pytest.MonkeyPatch) -> None:
    """The map is not vacuous: a loop module importing the api layer is reported."""
    real = modules

    def with_a_bad_module(root: Path, package: str) -> Iterator[tuple[str, ast.AST]]:
        yield from real(root, package)
        yield "agent.loop.bad", ast.parse("from agent.api.app import create_app")

    monkeypatch.setitem(globals(), "modules", with_a_bad_module)
    assert violations() == ["agent.loop.bad (loop) imports api"]
