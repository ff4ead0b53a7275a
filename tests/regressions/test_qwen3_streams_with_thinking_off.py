"""Regression (issue 29): with qwen3 and THINK=false the whole answer arrived in one block at the end of the round,
because every `qwen3*` model was held back until `</think>` or the round's end. Now only models whose reasoning
can arrive without an opening tag are held (the shipped THINK_HOLDBACK_MODELS); any other model's content streams
as soon as it cannot be a `<think>` block — and no reasoning reaches the answer either way.

Order, not time: the scripted model's body records each line as httpx pulls it, the test records each event as
the backend yields it; the first answer text must come before the model's last content line is even read."""

import json
from collections.abc import AsyncIterator

import httpx
import pytest

from agent.backends.base import RoundRequest, TextDelta, ThinkingDelta
from agent.backends.ollama import stream_chat
from agent.settings import Settings

SHIPPED = Settings.model_fields["think_holdback_models"].default
ANSWER = "There were 42 deposits today , totalling 12,345.67 USD ."


def lines(contents: list[str]) -> list[bytes]:
    msg = {"role": "assistant"}
    chunks = [{"message": {**msg, "content": c}, "done": False} for c in contents]
    chunks.append({"message": {**msg, "content": ""}, "done": True, "done_reason": "stop", "eval_count": 9})
    return [json.dumps(c).encode() + b"\n" for c in chunks]


async def run(model: str, contents: list[str]) -> list[tuple[str, str]]:
    """The interleaved log: ("model", content) as each line is read, ("text"/"thinking", text) as events leave."""
    log: list[tuple[str, str]] = []

    async def body() -> AsyncIterator[bytes]:
        for line, content in zip(lines(contents), [*contents, ""], strict=True):
            log.append(("model", content))
            yield line

    transport = httpx.MockTransport(lambda request: httpx.Response(200, content=body()))
    holdback = Settings(think_holdback_models=SHIPPED).holds_back_think(model)
    request = RoundRequest(model=model, messages=[], tools=None, options={}, think=False)
    async with httpx.AsyncClient(transport=transport) as http:
        async for event in stream_chat(http, "http://ollama", request, holdback):
            if isinstance(event, TextDelta | ThinkingDelta):
                log.append(("text" if isinstance(event, TextDelta) else "thinking", event.text))
    return log


@pytest.mark.parametrize("model", ["qwen3:8b", "qwen3:1.7b", "qwen3:4b-instruct-2507-q4_K_M", "qwen2.5:3b"])
async def test_a_model_that_opens_its_own_think_block_streams_its_answer(model: str) -> None:
    words = [w + " " for w in ANSWER.split()]
    log = await run(model, words)
    first_text = next(i for i, (kind, _) in enumerate(log) if kind == "text")
    last_model_line = max(i for i, (kind, c) in enumerate(log) if kind == "model" and c)
    assert first_text < last_model_line  # streamed while the model was still generating
    assert "".join(t for kind, t in log if kind == "text") == "".join(words)


@pytest.mark.parametrize("model", ["qwen3:8b", "qwen3:4b-instruct-2507-q4_K_M"])
async def test_its_tagged_reasoning_still_never_reaches_the_answer(model: str) -> None:
    log = await run(model, ["<th", "ink>\nThe user asks", " how many 42 ...", "</thi", "nk>\n\n", "Forty-two", "."])
    assert "".join(t for kind, t in log if kind == "text") == "Forty-two."
    assert "user asks" in "".join(t for kind, t in log if kind == "thinking")


@pytest.mark.parametrize("model", ["qwen3:4b", "qwen3:30b-a3b", "qwen3:4b-thinking-2507-q4_K_M", "deepseek-r1:8b"])
async def test_a_model_whose_template_opens_the_block_keeps_the_strict_hold(model: str) -> None:
    """qwen3:4b is Qwen3-4B-Thinking-2507: with think=false its reasoning arrives untagged, then `</think>`."""
    log = await run(model, ["Okay, the user", " asks how many.", "</think>", "\n\n", "Forty-two", " deposits."])
    texts = [t for kind, t in log if kind == "text"]
    assert "".join(texts) == "Forty-two deposits."
    first_text = next(i for i, (kind, _) in enumerate(log) if kind == "text")
    assert first_text < max(i for i, (kind, c) in enumerate(log) if kind == "model" and c)  # right after `</think>`
