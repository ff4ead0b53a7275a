"""The tools, one module per domain; `@tool` marks a function and `discover()` finds every marked one.

Adding a report is one function in one file: write a typed function with the model-facing docstring in
any module of this package, put `@tool()` above it, done (a new module here is picked up too).

A tool declares which of its arguments are personal data (`personal=`: a customer's name or ID) and which
are free text (`free_text=`: note texts, search patterns). The declaration travels in the tool list as
`_meta["local-agent/audit"]`, and the agent's audit log follows it: personal arguments pseudonymised,
free text only as a size and keyed hash. An undeclared argument is logged as given.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from mcp.types import ToolAnnotations

F = TypeVar("F", bound=Callable[..., Any])
_MARK = "__agent_tool__"
_AUDIT = "__agent_tool_audit__"
AUDIT_META = "local-agent/audit"
REQUIRED_SECTIONS = ("WHEN TO USE:", "ALWAYS call this tool", "Example:", "WHEN NOT TO USE:")
# Listing order follows the design table; modules not named here come after, alphabetically.
MODULE_ORDER = ("system", "files", "notes", "payments", "trading", "customers", "kyc")


@dataclass(frozen=True)
class ToolSpec:
    fn: Callable[..., Any]
    name: str
    description: str
    annotations: ToolAnnotations
    meta: dict[str, Any]


def tool(
    *, read_only: bool = True, personal: tuple[str, ...] = (), free_text: tuple[str, ...] = ()
) -> Callable[[F], F]:
    """Mark `fn` as an MCP tool (name = function name, description = its cleaned docstring)."""

    def mark(fn: F) -> F:
        unknown = set(personal + free_text) - set(inspect.signature(fn).parameters)
        if unknown:
            raise ValueError(f"tool {fn.__name__} declares arguments it does not have: {sorted(unknown)}")
        setattr(fn, _AUDIT, {AUDIT_META: {"personal": sorted(personal), "free_text": sorted(free_text)}})
        setattr(
            fn,
            _MARK,
            ToolAnnotations(
                read_only_hint=read_only, destructive_hint=False, idempotent_hint=read_only, open_world_hint=False
            ),
        )
        return fn

    return mark


def describe(fn: Callable[..., Any]) -> str:
    """The docstring with indentation removed, identical on every Python version."""
    description = inspect.cleandoc(fn.__doc__ or "")
    missing = [section for section in REQUIRED_SECTIONS if section not in description]
    if missing:
        raise ValueError(f"tool {fn.__name__} docstring lacks {', '.join(missing)}")
    return description


def discover() -> list[ToolSpec]:
    """Every `@tool` function in this package's modules, in module then definition order."""
    specs: list[ToolSpec] = []
    names = sorted(m.name for m in pkgutil.iter_modules(__path__))
    ordered = [n for n in MODULE_ORDER if n in names] + [n for n in names if n not in MODULE_ORDER]
    for name in ordered:
        module = importlib.import_module(f"{__name__}.{name}")
        for fn in vars(module).values():
            annotations = getattr(fn, _MARK, None)
            if callable(fn) and annotations is not None and fn.__module__ == module.__name__:
                specs.append(ToolSpec(fn, fn.__name__, describe(fn), annotations, getattr(fn, _AUDIT)))
    return specs
