"""Issue 13: a new MCP_TOKEN in .env and `docker compose up -d` re-runs only secrets-init. The token file on
the shared mcp-secret volume changes under running agent-api and mcp-server; both must follow it, so that a
later restart of either one (a crash, a config change) does not leave them holding different tokens."""

from __future__ import annotations

import secrets

import httpx
import pytest

from tests.e2e.fake import chat_body, script, tool_then_answer
from tests.e2e.stack import Stack

pytestmark = pytest.mark.e2e


def ask(stack: Stack) -> httpx.Response:
    api = stack.url("agent-api", 8000)
    return httpx.post(f"{api}/v1/chat/completions", json=chat_body("saat kaç"), headers=stack.headers, timeout=60)


def test_a_new_mcp_token_reaches_running_services_after_up(stack: Stack) -> None:
    script(stack, tool_then_answer("saat", "sistem_bilgisi", {}, "Saat: {tool_result}"))
    assert ask(stack).status_code == 200
    api_before = stack.container("agent-api")
    new = secrets.token_hex(32)
    stack.env["MCP_TOKEN"] = new  # what an operator puts into .env
    try:
        stack.up()
        assert stack.exec("agent-api", "cat", "/run/local-agent/mcp/token").stdout == new
        stack.compose("restart", "mcp-server")  # it now reads the new token at start...
        stack.up()  # (waits for it to be healthy again)
        assert stack.container("agent-api") == api_before  # ...while agent-api was never restarted
        reply = ask(stack)
        assert reply.status_code == 200, reply.text
        assert reply.json()["local_agent"]["tool_calls"][0]["outcome"] == "ok"
    finally:
        stack.env.pop("MCP_TOKEN")  # later `up`s keep the new token from the volume
