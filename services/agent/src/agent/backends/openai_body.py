"""A round as the body of an OpenAI-compatible /v1/chat/completions request: Ollama-shaped messages turned into
OpenAI's shape (JSON-string arguments, tool results tied to their call ids), the round's options, its tools and
the decision schema of constrained tool calling (`response_format`)."""

from __future__ import annotations

import json
from typing import Any

from agent.backends.base import Message, RoundRequest

# Ollama option name -> OpenAI body field (num_ctx is the server's own start flag: it cannot go per request).
OPTION_FIELDS = {
    "temperature": "temperature",
    "top_p": "top_p",
    "seed": "seed",
    "stop": "stop",
    "num_predict": "max_tokens",
}


def openai_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Ollama-shaped messages in OpenAI shape: JSON-string arguments, tool results tied to their call ids."""
    out: list[dict[str, Any]] = []
    pending: list[tuple[str, str]] = []  # (call id, tool name) of the last assistant turn, not yet answered
    for msg in messages:
        role = msg["role"]
        if role == "assistant" and msg.get("tool_calls"):
            calls: list[dict[str, Any]] = []
            for i, call in enumerate(msg["tool_calls"]):
                fn = call.get("function") or {}
                call_id = str(call.get("id") or f"call_{len(out)}_{i}")
                args = fn.get("arguments")
                calls.append(
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {
                            "name": fn.get("name", ""),
                            "arguments": args if isinstance(args, str) else json.dumps(args or {}),
                        },
                    }
                )
            pending = [(c["id"], c["function"]["name"]) for c in calls]
            out.append({"role": "assistant", "content": msg.get("content") or None, "tool_calls": calls})
        elif role == "tool":
            name = msg.get("tool_name")
            match = next((p for p in pending if p[1] == name), pending[0] if pending else None)
            entry = {"role": "tool", "content": msg.get("content", "")}
            if match is not None:
                pending.remove(match)
                entry["tool_call_id"] = match[0]
            out.append(entry)
        else:  # the `thinking` of earlier turns is not sent back, as Ollama's own templates drop it
            out.append({"role": role, "content": msg.get("content", "")})
    return out


def openai_body(request: RoundRequest, cache_prompt: bool) -> dict[str, Any]:
    """The /v1/chat/completions body for this round (always streaming, usage in the last chunk)."""
    body: dict[str, Any] = {
        "model": request.model,
        "messages": openai_messages(request.messages),
        "stream": True,
        "stream_options": {"include_usage": True},
        "cache_prompt": cache_prompt,
    }
    for option, name in OPTION_FIELDS.items():
        if option in request.options:
            body[name] = request.options[option]
    if request.tools:
        body["tools"] = request.tools
    if request.schema is not None:  # llama-server, vLLM and OpenAI enforce it while decoding
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "decision", "schema": request.schema, "strict": True},
        }
    return body
