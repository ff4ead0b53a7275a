"""Both API flavours render the same loop events: OpenAI JSON/SSE and Ollama JSON/NDJSON."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

from agent.api.render_ollama import OllamaRenderer
from agent.api.render_openai import UNFINISHED, OpenAIRenderer
from agent.backends.base import ToolCall
from agent.errors import DependencyDown
from agent.loop.events import FinalEvent, LoopEvent, TextEvent, ThinkingEvent, ToolCallEvent, TraceEntry, Usage

TRACE = [TraceEntry("kyc_ozeti", {}, "ok", 1, 10)]
ANSWER = "3 pending.\n\n---\nTools used: kyc_ozeti"


async def events(fail: bool = False) -> AsyncIterator[LoopEvent]:
    yield ThinkingEvent("count them")
    yield ToolCallEvent(ToolCall("call_1", "kyc_ozeti", {}), 1)
    yield TextEvent("3 pending.")
    if fail:
        raise DependencyDown("Ollama is unreachable at http://ollama:11434")
    yield TextEvent("\n\n---\nTools used: kyc_ozeti")
    yield FinalEvent(ANSWER, "stop", Usage(20, 5), 2, TRACE)


async def test_openai_non_streaming_shape() -> None:
    body = await OpenAIRenderer("qwen3:4b").complete(events())
    choice = body["choices"][0]
    assert body["object"] == "chat.completion" and body["id"].startswith("chatcmpl-")
    assert choice["message"] == {"role": "assistant", "content": ANSWER, "reasoning_content": "count them"}
    assert choice["finish_reason"] == "stop"
    assert body["usage"] == {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25}
    assert body["local_agent"] == {"tools_used": ["kyc_ozeti"], "tool_calls": [t.to_dict() for t in TRACE], "rounds": 2}


async def test_openai_sse_chunks_usage_and_done() -> None:
    lines = [line async for line in OpenAIRenderer("qwen3:4b").stream(events(), include_usage=True)]
    data = [json.loads(line[6:]) for line in lines if line.startswith("data: {")]
    assert lines[-1] == "data: [DONE]\n\n"
    assert any(line.startswith(": calling tool kyc_ozeti") for line in lines)  # a comment, ignored by clients
    assert data[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert "".join(d["choices"][0]["delta"].get("content", "") for d in data if d["choices"]) == ANSWER
    assert [
        d["choices"][0]["delta"]["reasoning_content"]
        for d in data
        if d["choices"] and "reasoning_content" in d["choices"][0]["delta"]
    ] == ["count them"]
    final = [d for d in data if d["choices"] and d["choices"][0]["finish_reason"]]
    assert len(final) == 1 and final[0]["local_agent"]["tools_used"] == ["kyc_ozeti"]
    assert data[-1]["choices"] == [] and data[-1]["usage"]["total_tokens"] == 25
    assert len({d["id"] for d in data}) == 1


async def test_openai_stream_error_after_first_byte_is_an_error_event_without_done() -> None:
    lines = [line async for line in OpenAIRenderer("m").stream(events(fail=True), include_usage=False)]
    last = json.loads(lines[-1][6:])
    assert last["error"]["type"] == "service_unavailable" and "unavailable" in last["error"]["message"]
    assert "ollama:11434" not in "".join(lines)  # the operator's detail stays in the logs
    assert "data: [DONE]\n\n" not in lines


async def test_ollama_non_streaming_and_ndjson() -> None:
    body = await OllamaRenderer("qwen3:4b").complete(events())
    assert body["message"] == {"role": "assistant", "content": ANSWER, "thinking": "count them"}
    assert body["done"] is True and body["done_reason"] == "stop" and body["eval_count"] == 5
    lines = [json.loads(line) async for line in OllamaRenderer("qwen3:4b").stream(events())]
    assert [line["done"] for line in lines] == [False, False, False, True]
    assert "".join(line["message"]["content"] for line in lines) == ANSWER
    assert lines[0]["message"]["thinking"] == "count them"
    assert lines[-1]["local_agent"]["rounds"] == 2


async def test_ollama_stream_error_is_readable_content_then_an_error_line() -> None:
    """Open WebUI ignores `error` lines: without the content chunk the user sees a cut-off answer as complete."""
    lines = [json.loads(line) async for line in OllamaRenderer("m").stream(events(fail=True))]
    assert lines[-1] == {"error": DependencyDown.public}
    assert lines[-2]["done"] is False and lines[-2]["message"]["content"] == f"\n\n⚠️ {DependencyDown.public}"
    assert "ollama:11434" not in json.dumps(lines)


async def test_ollama_stream_error_is_in_the_questions_language_without_operator_advice() -> None:
    lines = [json.loads(line) async for line in OllamaRenderer("m", "tr").stream(events(fail=True))]
    assert lines[-1] == {"error": DependencyDown.public_tr}
    assert lines[-2]["message"]["content"] == f"\n\n⚠️ {DependencyDown.public_tr}"
    assert "ulaşılamıyor" in lines[-1]["error"]
    for text in (DependencyDown.public, DependencyDown.public_tr):  # the operator's advice stays in the logs
        assert text and "/readyz" not in text and "logs" not in text


async def test_ollama_failure_before_the_first_token_reads_as_one_mid_answer() -> None:
    """The same failure text and lines with nothing streamed yet (the chat screen's route) as after words."""
    mid = [json.loads(line) async for line in OllamaRenderer("m", "tr").stream(events(fail=True))]
    before = [json.loads(line) for line in OllamaRenderer("m", "tr").failed(DependencyDown("Ollama is down"))]
    assert before[-1] == mid[-1] and before[0]["message"]["content"] == mid[-2]["message"]["content"].lstrip()


async def test_openai_stream_of_a_chat_screen_fails_mid_answer_as_it_does_before_the_first_word() -> None:
    """The failure text follows the words sent, as on /api/chat; the unfinished mark stays (no hidden status)."""
    lines = [line async for line in OpenAIRenderer("m", "tr").stream(events(fail=True), include_usage=False)]
    data = [json.loads(line[6:]) for line in lines if line.startswith("data: {")]
    assert [d["event"] for d in data if "event" in d] == [
        {"type": "status", "data": {"description": UNFINISHED["tr"], "done": True}}
    ]
    assert data[-1]["choices"][0]["delta"] == {"content": f"\n\n⚠️ {DependencyDown.public_tr}"}
    assert lines[-1] == "data: [DONE]\n\n" and "error" not in "".join(lines)
    assert "ollama:11434" not in "".join(lines)
