"""Fingerprints of the tool descriptions, read straight from the MCP server (`--mcp-url`).

Used when the agent's `/v1/agent/info` is missing, and to tell *which* tool's description changed
between two runs. Both use agent_contract.fingerprint, so the hashes agree.
"""

from __future__ import annotations

import asyncio
from typing import Any

from agent.eval.errors import EvalError
from agent.mcp_client import ToolBox
from agent.toolspec import ToolSpec
from agent_contract.fingerprint import tool_fingerprints


async def _list(url: str, token: str | None, wait_s: float) -> list[ToolSpec]:
    box = ToolBox(url, token, wait_s, cache_seconds=0)
    try:
        return await box.list_tools(refresh=True)
    finally:
        await box.aclose()


def from_mcp(url: str, token: str | None, timeout: float = 15.0) -> dict[str, Any]:
    try:
        return tool_fingerprints(asyncio.run(_list(url, token, timeout)))
    except Exception as exc:  # DependencyDown and transport errors alike: the operator must fix the URL/token
        raise EvalError(f"cannot list the tools at --mcp-url {url}: {exc}") from exc
