"""Program the scripted Ollama inside the stack through its control API (published on loopback in e2e)."""

from __future__ import annotations

from typing import Any

import httpx

from tests.e2e.stack import Stack

MODEL = "qwen3:4b"


def fake_url(stack: Stack) -> str:
    return stack.url("ollama", 11434)


def script(stack: Stack, body: dict[str, Any]) -> None:
    """Replace the fake's behaviour (POST /_fake/reset first, so stats and recorded requests restart)."""
    url = fake_url(stack)
    httpx.post(f"{url}/_fake/reset", timeout=10).raise_for_status()
    httpx.post(f"{url}/_fake/script", json=body, timeout=10).raise_for_status()


def stats(stack: Stack) -> dict[str, Any]:
    data: dict[str, Any] = httpx.get(f"{fake_url(stack)}/_fake/stats", timeout=10).json()
    return data


def tool_then_answer(trigger: str, tool: str, arguments: dict[str, Any], answer: str) -> dict[str, Any]:
    """Round 1: the model calls `tool`; round 2 (after the tool result): `answer` with the result in it."""
    return {
        "rules": [
            {
                "when": {"user_contains": trigger, "last_role": "user"},
                "reply": {"tool_calls": [{"name": tool, "arguments": arguments}]},
            },
            {"when": {"last_role": "tool"}, "reply": {"content": answer}},
        ]
    }


# A model without thinking: the agent holds qwen3's content back until </think> or the round's end.
PLAIN_MODEL = "qwen2.5:3b"


def chat_body(text: str, *, stream: bool = False, model: str = MODEL) -> dict[str, Any]:
    return {"model": model, "stream": stream, "messages": [{"role": "user", "content": text}]}
