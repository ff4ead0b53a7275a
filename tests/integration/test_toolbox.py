"""The agent's MCP client against a real MCP server over streamable HTTP: per-tool timeout, list cache, the request
context each call carries."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator

import pytest
import structlog.testing
import uvicorn
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.transport_security import TransportSecuritySettings

from agent.context import RequestContext
from agent.mcp_client import ToolBox
from agent_contract.headers import Caller
from agent_contract.policy import Policy
from tests.support.procs import free_port, wait_until


@pytest.fixture(scope="module")
def slow_server() -> Iterator[tuple[str, MCPServer]]:
    """A minimal MCP server with one slow tool, served by uvicorn on loopback."""
    server = MCPServer("slow")

    @server.tool()
    async def sleepy(seconds: float) -> str:
        """Sleeps, then says so."""
        await asyncio.sleep(seconds)
        return f"slept {seconds}"

    app = server.streamable_http_app(
        stateless_http=True,
        json_response=True,
        transport_security=TransportSecuritySettings(allowed_hosts=["127.0.0.1:*"]),
    )
    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    uv = uvicorn.Server(config)
    thread = threading.Thread(target=uv.run, daemon=True)
    thread.start()
    wait_until(lambda: uv.started, what="the slow MCP server")
    yield f"http://127.0.0.1:{port}/mcp", server
    uv.should_exit = True
    thread.join(timeout=10)


async def test_a_slow_tool_becomes_an_error_result_and_the_client_keeps_working(
    slow_server: tuple[str, MCPServer],
) -> None:
    box = ToolBox(slow_server[0], None, timeout=0.5, cache_seconds=60)
    try:
        slow = await box.call("sleepy", {"seconds": 3})
        assert slow.is_error and "did not answer within 0.5 seconds" in slow.text
        fast = await box.call("sleepy", {"seconds": 0})
        assert not fast.is_error and fast.text == "slept 0.0"
    finally:
        await box.aclose()


async def test_the_tool_list_is_cached_until_refreshed(slow_server: tuple[str, MCPServer]) -> None:
    url, server = slow_server
    box = ToolBox(url, None, timeout=5, cache_seconds=60)
    try:
        assert [t.name for t in await box.list_tools()] == ["sleepy"]

        @server.tool()
        def added() -> str:
            """A tool added while the agent runs."""
            return "new"

        assert [t.name for t in await box.list_tools()] == ["sleepy"]  # served from the cache
        assert sorted(t.name for t in await box.list_tools(refresh=True)) == ["added", "sleepy"]
    finally:
        server.remove_tool("added")
        await box.aclose()


async def test_a_policy_naming_a_tool_the_server_lacks_is_logged_once(slow_server: tuple[str, MCPServer]) -> None:
    policy = Policy({"ops": frozenset({"sleepy", "sleppy"}), "admin": frozenset({"*"})}, source="p.yaml")
    box = ToolBox(slow_server[0], None, timeout=5, cache_seconds=0, policy=policy)
    try:
        with structlog.testing.capture_logs() as logs:
            await box.list_tools()
            await box.list_tools(refresh=True)
    finally:
        await box.aclose()
    (entry,) = [e for e in logs if e["event"] == "policy_names_unknown_tools"]
    assert entry["log_level"] == "error" and entry["unknown"] == ["sleppy"] and entry["policy"] == "p.yaml"


async def test_each_call_carries_the_request_context_it_is_given_and_no_other(
    slow_server: tuple[str, MCPServer],
) -> None:
    """The request id and the caller reach the MCP server as a parameter of the call (agent.context), not from
    ambient state: two requests' calls at once on one connection carry their own each, a call for no request
    neither."""
    url, server = slow_server
    names = ("x-request-id", "x-agent-user", "x-agent-role")

    @server.tool()
    async def heard(ctx: Context) -> str:
        """The agent's headers this call came with."""
        return json.dumps({name: (ctx.headers or {}).get(name) for name in names})

    box = ToolBox(url, None, timeout=5, cache_seconds=60)
    ayse = RequestContext("rid-ayse", Caller("ayşe@example.com", "desk"))
    try:
        answers = await asyncio.gather(
            box.call("heard", {}, ayse), box.call("heard", {}, RequestContext("rid-boss", Caller("boss", "admin")))
        )
        alone = await box.call("heard", {})
    finally:
        server.remove_tool("heard")
        await box.aclose()
    assert [json.loads(a.text) for a in answers] == [
        dict(zip(names, ["rid-ayse", "ay%C5%9Fe%40example.com", "desk"], strict=True)),
        dict(zip(names, ["rid-boss", "boss", "admin"], strict=True)),
    ]
    assert json.loads(alone.text) == dict.fromkeys(names)
