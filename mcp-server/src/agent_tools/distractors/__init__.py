"""Distractor reports for measuring tool retrieval: 39 plausible tools that, with the real 11, make 50.

Loaded only with `MCP_DISTRACTOR_TOOLS=true` on the demo database (never with `REPORTS_DB_URL`), so they
cannot reach a production tool list by accident. They live outside `agent_tools.tools`, so `discover()`
never finds them. Their docstrings follow the real tools' rules; calling one returns a ToolError that
says it is a measurement distractor with no data, so no figure can come from it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from agent_tools.distractors.catalog import BUSINESS, Distractor
from agent_tools.distractors.operations import OPERATIONS
from agent_tools.tools import _AUDIT, _MARK, ToolSpec, describe, tool

CATALOG = BUSINESS + OPERATIONS

StartDate = Annotated[str, Field(description="First day: 'today', 'yesterday', 'bugün', 'dün' or YYYY-MM-DD.")]
EndDate = Annotated[
    str, Field(description="Last day of a range (same formats); empty means the same day as start_date.")
]
Symbol = Annotated[str, Field(description="Instrument, e.g. EURUSD or XAUUSD; empty for every symbol.")]


def docstring(d: Distractor) -> str:
    return (
        f"{d.summary}\n\nWHEN TO USE: {d.use}\nTrigger phrases: {d.triggers}.\n"
        "You do not know these numbers: ALWAYS call this tool for these questions, never estimate.\n\n"
        f"Example: {d.example}\n\nWHEN NOT TO USE: {d.not_use}"
    )


def _refuse(name: str) -> ToolError:
    return ToolError(f"{name} is a distractor for measuring tool retrieval (MCP_DISTRACTOR_TOOLS): it has no data.")


def _make(d: Distractor) -> Callable[..., Any]:
    if d.params == "symbol":

        def by_symbol(symbol: Symbol = "") -> dict[str, Any]:
            raise _refuse(d.name)

        fn: Callable[..., Any] = by_symbol
    else:

        def by_dates(start_date: StartDate = "today", end_date: EndDate = "") -> dict[str, Any]:
            raise _refuse(d.name)

        fn = by_dates
    fn.__name__ = fn.__qualname__ = d.name
    fn.__doc__ = docstring(d)
    return tool()(fn)


def specs(taken: set[str]) -> list[ToolSpec]:
    """Every distractor as a ToolSpec, in catalog order (the same checks as a real tool's docstring); one named
    like a real tool in `taken` is left out: the real tool wins."""
    out = []
    for d in CATALOG:
        if d.name in taken:
            continue
        fn = _make(d)
        out.append(ToolSpec(fn, d.name, describe(fn), getattr(fn, _MARK), getattr(fn, _AUDIT)))
    return out
