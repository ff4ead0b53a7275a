"""ObserveMiddleware: the request id the agent logs and returns follows the shared rule (agent_contract)."""

from __future__ import annotations

import httpx
import pytest
from starlette.types import Receive, Scope, Send

from agent.api.middleware import ObserveMiddleware
from agent.mcp_client import request_id_var

seen: list[str] = []


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    seen.append(request_id_var.get())
    await send({"type": "http.response.start", "status": 204, "headers": []})
    await send({"type": "http.response.body", "body": b""})


async def returned(sent: str | None) -> str:
    transport = httpx.ASGITransport(app=ObserveMiddleware(app))
    headers = {"X-Request-ID": sent} if sent is not None else {}
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        response = await client.get("/x", headers=headers)
    assert seen[-1] == response.headers["x-request-id"]  # what the MCP server is sent is what the client sees
    return response.headers["x-request-id"]


async def test_a_sane_request_id_is_kept_up_to_128_characters() -> None:
    assert await returned("client-1.a:b_c") == "client-1.a:b_c"
    assert await returned("x" * 100) == "x" * 100  # was cut to 64 characters before the shared rule


@pytest.mark.parametrize("sent", ["has space", "x" * 129, "", None])
async def test_an_id_the_mcp_server_would_drop_is_replaced(sent: str | None) -> None:
    rid = await returned(sent)
    assert rid != sent and len(rid) == 32
