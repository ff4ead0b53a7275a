"""Regression: with qwen3 (a think-holdback model) the whole answer arrived in one block at the end of the
round even when Ollama itself separated the reasoning into `message.thinking`. Content after a proper
thinking field is the answer and must stream token by token."""

import json

import httpx

from agent.backends.base import RoundRequest, TextDelta, ThinkingDelta
from agent.backends.ollama import stream_chat


def ndjson(*chunks: dict[str, object]) -> bytes:
    return b"".join(json.dumps(c).encode() + b"\n" for c in chunks)


async def test_content_after_a_thinking_field_streams_at_once() -> None:
    msg = {"role": "assistant", "content": ""}
    body = ndjson(
        {"message": {**msg, "thinking": "reasoning"}, "done": False},
        {"message": {**msg, "content": "Five "}, "done": False},
        {"message": {**msg, "content": "deposits."}, "done": False},
        {"message": msg, "done": True, "done_reason": "stop", "eval_count": 3},
    )
    transport = httpx.MockTransport(lambda request: httpx.Response(200, content=body))
    request = RoundRequest(model="qwen3:4b", messages=[], tools=None, options={})
    async with httpx.AsyncClient(transport=transport) as http:
        events = [e async for e in stream_chat(http, "http://ollama", request, holdback=True)]
    texts = [e.text for e in events if isinstance(e, TextDelta)]
    assert texts == ["Five ", "deposits."]  # two deltas, not one block at the end
    assert isinstance(events[0], ThinkingDelta)
