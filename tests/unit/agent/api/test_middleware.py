"""ObserveMiddleware: the request id the agent logs, audits and returns is its own (agent_contract.request_id)."""

from __future__ import annotations

import httpx
import pytest
from starlette.types import Receive, Scope, Send

from agent.api.middleware import ObserveMiddleware

seen: list[str] = []


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    seen.append(scope["state"]["request_id"])  # request.state.request_id: the request context's (agent.api.access)
    await send({"type": "http.response.start", "status": 204, "headers": []})
    await send({"type": "http.response.body", "body": b""})


async def returned(sent: str | None) -> str:
    transport = httpx.ASGITransport(app=ObserveMiddleware(app))
    headers = {"X-Request-ID": sent} if sent is not None else {}
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        response = await client.get("/x", headers=headers)
    assert seen[-1] == response.headers["x-request-id"]  # the request context's id is what the client sees
    return response.headers["x-request-id"]


async def test_every_request_gets_an_id_of_the_agents_never_the_clients() -> None:
    """Issue 36: the audit's request id was the client's X-Request-ID, so two users' records shared one id."""
    first, second = await returned("client-1.a:b_c"), await returned("client-1.a:b_c")
    assert first != "client-1.a:b_c" and second != first and len(first) == len(second) == 32


@pytest.mark.parametrize("sent", ["has space", "x" * 129, "", None])
async def test_an_invalid_client_id_changes_nothing(sent: str | None) -> None:
    rid = await returned(sent)
    assert rid != sent and len(rid) == 32
