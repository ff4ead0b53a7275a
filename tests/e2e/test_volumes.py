"""`docker compose down` then `up` keeps state: notes saved through the agent survive (named volumes)."""

from __future__ import annotations

import uuid

import httpx
import pytest

from tests.e2e.fake import chat_body, script, tool_then_answer
from tests.e2e.stack import Stack

pytestmark = pytest.mark.e2e


def ask(stack: Stack, text: str) -> str:
    api = stack.url("agent-api", 8000)
    reply = httpx.post(f"{api}/v1/chat/completions", json=chat_body(text), headers=stack.headers, timeout=60)
    assert reply.status_code == 200, reply.text
    content: str = reply.json()["choices"][0]["message"]["content"]
    return content


def test_notes_survive_down_and_up(stack: Stack) -> None:
    marker = f"e2e-note-{uuid.uuid4().hex[:8]}"
    script(stack, tool_then_answer("remember", "not_kaydet", {"text": marker}, "Saved: {tool_result}"))
    assert ask(stack, "remember this").endswith("Tools used: not_kaydet")
    token_before = stack.exec("agent-api", "cat", "/run/local-agent/mcp/token").stdout

    stack.down(volumes=False)
    stack.up()

    script(stack, tool_then_answer("notes", "notlari_getir", {}, "Notes: {tool_result}"))
    assert marker in ask(stack, "show my notes")
    # The generated MCP token is kept too: the same secret after the restart.
    assert stack.exec("agent-api", "cat", "/run/local-agent/mcp/token").stdout == token_before
