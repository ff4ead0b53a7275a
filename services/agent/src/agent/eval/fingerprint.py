"""Fingerprints of the tool descriptions, read straight from the MCP server (`--mcp-url`).

Used when the agent's `/v1/agent/info` is missing, and to tell *which* tool's description changed
between two runs. The whole-set hash uses the agent's own formula (routes_info), so both agree.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from typing import Any

from agent.eval.errors import EvalError
from agent.mcp_client import ToolBox, ToolSpec


def _dump(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def fingerprints(tools: list[ToolSpec]) -> dict[str, Any]:
    """`tools_sha256` over the whole set (as the agent computes it) and `tool_sha256` per tool."""
    ordered = sorted(tools, key=lambda t: t.name)
    described = _dump([[t.name, t.description, t.input_schema] for t in ordered])
    return {
        "tools_sha256": hashlib.sha256(described.encode()).hexdigest(),
        "tool_sha256": {
            t.name: hashlib.sha256(_dump([t.name, t.description, t.input_schema]).encode()).hexdigest() for t in ordered
        },
        "tools": [t.name for t in ordered],
    }


async def _list(url: str, token: str | None, wait_s: float) -> list[ToolSpec]:
    box = ToolBox(url, token, wait_s, cache_seconds=0)
    try:
        return await box.list_tools(refresh=True)
    finally:
        await box.aclose()


def from_mcp(url: str, token: str | None, timeout: float = 15.0) -> dict[str, Any]:
    try:
        return fingerprints(asyncio.run(_list(url, token, timeout)))
    except Exception as exc:  # DependencyDown and transport errors alike: the operator must fix the URL/token
        raise EvalError(f"cannot list the tools at --mcp-url {url}: {exc}") from exc
