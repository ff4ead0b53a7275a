"""agent-api driven by the real openai SDK against the scripted Ollama and a real MCP server over HTTP."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import openai
import pytest

from tests.integration.conftest import AgentApi, FakeOllama

TIME_RULE = {
    "when": {"user_contains": "what time", "last_role": "user"},
    "reply": {"tool_calls": [{"name": "sistem_bilgisi", "arguments": {}}]},
}


@pytest.fixture
def sdk(agent_api: AgentApi) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=f"{agent_api.url}/v1", api_key="unused", max_retries=0) as client:
        yield client


def test_tool_answer_has_footer_usage_and_trace(agent_api: AgentApi, sdk: openai.OpenAI, ollama: FakeOllama) -> None:
    ollama.script(rules=[TIME_RULE])
    reply = sdk.chat.completions.create(model="qwen3:4b", messages=[{"role": "user", "content": "What time is it?"}])
    text = reply.choices[0].message.content or ""
    assert text.startswith("According to the tool:")
    assert text.endswith("\n\n---\nTools used: sistem_bilgisi")
    assert reply.choices[0].finish_reason == "stop"
    assert reply.usage is not None and reply.usage.completion_tokens > 0
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens
    trace = (reply.model_extra or {})["local_agent"]
    assert trace["tools_used"] == ["sistem_bilgisi"]
    assert trace["tool_calls"][0]["outcome"] == "ok" and trace["rounds"] == 2
    second_round = ollama.requests()[1]
    assert second_round["messages"][-1]["role"] == "tool"
    assert second_round["options"]["temperature"] == 0
    assert "think" not in second_round  # never sent by default


@pytest.mark.parametrize("model", ["qwen3:4b", "qwen2.5:3b"])
def test_streaming_forwards_tokens_and_ends_with_done(
    agent_api: AgentApi, sdk: openai.OpenAI, ollama: FakeOllama, model: str
) -> None:
    # qwen3 thinks first (Ollama sends `thinking` deltas), then its content streams token by token.
    after_tool = {
        "when": {"last_role": "tool"},
        "reply": {"thinking": "The tool said the time.", "content": "It is {tool_result} right now."},
    }
    ollama.script(rules=[TIME_RULE, after_tool])
    stream = sdk.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "what time is it"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert content.endswith("Tools used: sistem_bilgisi")
    text_chunks = [c for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(text_chunks) > 3  # token by token, not one finished block
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == ["stop"]
    assert chunks[-1].usage is not None and chunks[-1].choices == []


def test_raw_sse_wire_format(agent_api: AgentApi, ollama: FakeOllama) -> None:
    with httpx.stream(
        "POST",
        f"{agent_api.url}/v1/chat/completions",
        timeout=30,
        json={"model": "qwen3:4b", "stream": True, "messages": [{"role": "user", "content": "hello"}]},
    ) as resp:
        assert resp.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in resp.iter_lines() if line.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"
    bodies = [json.loads(line[6:]) for line in lines[:-1]]
    assert len({b["id"] for b in bodies}) == 1
    assert bodies[0]["choices"][0]["delta"]["role"] == "assistant"
    assert bodies[-1]["choices"][0]["finish_reason"] == "stop"
    assert bodies[-1]["local_agent"]["tools_used"] == []


def test_thinking_is_kept_apart_from_the_answer(agent_api: AgentApi, sdk: openai.OpenAI, ollama: FakeOllama) -> None:
    ollama.script(
        rules=[
            {"when": {"user_contains": "think"}, "reply": {"thinking": "secret chain", "content": "42"}},
            {"when": {"user_contains": "stray"}, "reply": {"raw_content": "I reason here</think>\n\nThe answer is 7."}},
        ]
    )
    first = httpx.post(
        f"{agent_api.url}/v1/chat/completions",
        timeout=30,
        json={"model": "qwen3:4b", "messages": [{"role": "user", "content": "think hard"}]},
    ).json()
    assert first["choices"][0]["message"]["content"] == "42"
    assert first["choices"][0]["message"]["reasoning_content"] == "secret chain"
    stream = sdk.chat.completions.create(
        model="qwen3:4b", messages=[{"role": "user", "content": "stray tag"}], stream=True
    )
    answer = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert answer == "The answer is 7."


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        (b"{not json", 400, None),
        (b'{"model": "qwen3:4b"}', 400, None),
        (b'{"model": "gpt-4", "messages": [{"role": "user", "content": "x"}]}', 404, "model_not_found"),
        (b'{"model": "qwen3:4b", "messages": [{"role": "pirate", "content": "x"}]}', 400, None),
        (b"[1, 2]", 400, None),
        (json.dumps({"model": "qwen3:4b", "messages": [{"role": "user", "content": "x"}] * 201}).encode(), 400, None),
    ],
)
def test_bad_requests_get_clear_4xx_in_openai_shape(
    agent_api: AgentApi, body: bytes, status: int, code: str | None
) -> None:
    resp = httpx.post(
        f"{agent_api.url}/v1/chat/completions", content=body, timeout=10, headers={"content-type": "application/json"}
    )
    assert resp.status_code == status
    error = resp.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["message"]
    assert error["code"] == code


def test_huge_body_is_413(agent_api: AgentApi) -> None:
    resp = httpx.post(
        f"{agent_api.url}/v1/chat/completions",
        timeout=10,
        json={"model": "qwen3:4b", "messages": [{"role": "user", "content": "x" * 2_000_000}]},
    )
    assert resp.status_code == 413
    assert "limit" in resp.json()["error"]["message"]


def test_huge_body_without_content_length_is_413(agent_api: AgentApi, ollama: FakeOllama) -> None:
    """Sent chunked (no Content-Length to refuse up front): the limit is counted on the bytes as they come."""
    ollama.script(default={"content": "should never be asked"})
    head = b'{"model": "qwen3:4b", "messages": [{"role": "user", "content": "'
    chunks = iter([head, *[b"x" * 100_000] * 12, b'"}]}'])  # 1.2 MB against MAX_BODY_BYTES=1,000,000
    json_type = {"Content-Type": "application/json"}
    resp = httpx.post(f"{agent_api.url}/v1/chat/completions", timeout=10, content=chunks, headers=json_type)
    assert resp.request.headers.get("transfer-encoding") == "chunked" and "content-length" not in resp.request.headers
    assert resp.status_code == 413
    assert "exceeds the limit of 1000000 bytes" in resp.json()["error"]["message"]
    assert ollama.requests() == []


def test_unknown_model_via_sdk_is_not_found(agent_api: AgentApi, sdk: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError):
        sdk.chat.completions.create(model="nope", messages=[{"role": "user", "content": "x"}])


def test_models_list(agent_api: AgentApi, sdk: openai.OpenAI) -> None:
    ids = [m.id for m in sdk.models.list()]
    assert ids == ["qwen3:4b", "qwen2.5:3b"]


def test_request_id_and_request_metrics(agent_api: AgentApi) -> None:
    resp = httpx.get(f"{agent_api.url}/v1/models", headers={"X-Request-ID": "rid-42"}, timeout=10)
    assert resp.headers["x-request-id"] != "rid-42" and len(resp.headers["x-request-id"]) == 32  # the agent's own
    assert len(httpx.get(f"{agent_api.url}/healthz", timeout=10).headers["x-request-id"]) == 32
    text = httpx.get(f"{agent_api.url}/metrics", timeout=10).text
    assert 'agent_request_duration_seconds_count{endpoint="/v1/models",outcome="ok",status="200"}' in text
