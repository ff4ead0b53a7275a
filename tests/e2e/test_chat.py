"""Chat through the published port reaches the real MCP container and answers with its tool trace."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from tests.e2e.fake import PLAIN_MODEL, chat_body, script, tool_then_answer
from tests.e2e.stack import Stack

pytestmark = pytest.mark.e2e


def test_chat_uses_a_tool_of_the_mcp_container(stack: Stack) -> None:
    script(stack, tool_then_answer("saat", "sistem_bilgisi", {}, "It is now: {tool_result}"))
    api = stack.url("agent-api", 8000)
    reply = httpx.post(f"{api}/v1/chat/completions", json=chat_body("Saat kaç?"), headers=stack.headers, timeout=60)
    assert reply.status_code == 200, reply.text
    content = reply.json()["choices"][0]["message"]["content"]
    assert content.endswith("Tools used: sistem_bilgisi"), content
    # The result came from the MCP container: its hostname is the container's id prefix.
    assert stack.container("mcp-server")[:12] in content


def test_openai_streaming_sends_tokens_as_they_come(stack: Stack) -> None:
    script(stack, {"default": {"content": "one two three four five six"}, "token_delay": 0.3})
    api = stack.url("agent-api", 8000)
    arrivals: list[tuple[float, str]] = []
    body = chat_body("hi", stream=True, model=PLAIN_MODEL)
    with httpx.stream("POST", f"{api}/v1/chat/completions", json=body, headers=stack.headers, timeout=60) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        arrivals = [
            (time.monotonic(), line.removeprefix("data: ")) for line in r.iter_lines() if line.startswith("data: ")
        ]
    assert arrivals[-1][1] == "[DONE]"
    chunks = [(t, json.loads(e)) for t, e in arrivals[:-1]]
    content = [
        (t, c["choices"][0]["delta"]["content"])
        for t, c in chunks
        if c.get("choices") and c["choices"][0]["delta"].get("content")
    ]
    assert "one two three four five six" in "".join(text for _, text in content)
    # Tokens reach the client while the model still generates (0.3 s apart), not in one piece at the end.
    assert len(content) >= 3 and content[-1][0] - content[0][0] > 0.6
    assert chunks[-1][1]["choices"][0]["finish_reason"] == "stop"


def test_ollama_api_streams_ndjson_with_tools(stack: Stack) -> None:
    script(stack, tool_then_answer("notes", "notlari_getir", {}, "Your notes: {tool_result}"))
    api = stack.url("agent-api", 8000)
    with httpx.stream(
        "POST", f"{api}/api/chat", json=chat_body("list my notes", stream=True), headers=stack.headers, timeout=60
    ) as r:
        assert r.status_code == 200
        lines = [json.loads(line) for line in r.iter_lines() if line.strip()]
    assert lines[-1]["done"] is True
    text = "".join(line.get("message", {}).get("content", "") for line in lines)
    assert "Tools used: notlari_getir" in text
