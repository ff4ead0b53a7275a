"""The OpenAI-protocol backend's pure parts: body translation, tool-call fragments, error mapping, the switch."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import SecretStr

from agent.backends.base import RoundRequest
from agent.backends.engine import direct_backend
from agent.backends.ollama import OllamaBackend
from agent.backends.openai_body import openai_body
from agent.backends.openai_compat import OpenAICompatBackend, ToolCallParts, error_for
from agent.errors import BadRequest, DependencyDown, ModelNotFound, UpstreamError
from agent.settings import Settings

TOOLS = [{"type": "function", "function": {"name": "kur", "parameters": {"type": "object"}}}]


def request(tools: bool = False) -> RoundRequest:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "rates?"},
        {
            "role": "assistant",
            "content": "",
            "thinking": "let me look",
            "tool_calls": [
                {"id": "a1", "function": {"name": "kur", "arguments": {"ccy": "USD"}}},
                {"function": {"name": "saat", "arguments": {}}},
            ],
        },
        {"role": "tool", "tool_name": "saat", "content": "12:00"},
        {"role": "tool", "tool_name": "kur", "content": "34.1"},
    ]
    options = {"temperature": 0.0, "num_ctx": 8192, "num_predict": 64}
    return RoundRequest("m", messages, TOOLS if tools else None, options, request_id="r1")


def test_body_ties_each_tool_result_to_its_call_and_maps_options() -> None:
    body = openai_body(request(tools=True), cache_prompt=False)
    assistant, saat, kur = body["messages"][2:]
    ids = {c["function"]["name"]: c["id"] for c in assistant["tool_calls"]}
    assert ids["kur"] == "a1" and ids["saat"]  # a call without an id gets one
    assert json.loads(assistant["tool_calls"][0]["function"]["arguments"]) == {"ccy": "USD"}
    assert "thinking" not in assistant and assistant["content"] is None
    assert (saat["tool_call_id"], kur["tool_call_id"]) == (ids["saat"], "a1")
    assert body["max_tokens"] == 64 and body["temperature"] == 0.0 and "num_ctx" not in body
    assert body["cache_prompt"] is False and body["stream_options"] == {"include_usage": True}
    assert body["tools"] == TOOLS and "tools" not in openai_body(request(), cache_prompt=True)


def test_fragments_join_and_cut_off_arguments_are_marked_invalid() -> None:
    parts = ToolCallParts()
    parts.feed([{"index": 0, "id": "c0", "function": {"name": "kur", "arguments": ""}}])
    parts.feed([{"index": 0, "function": {"arguments": '{"ccy": '}}, {"index": 1, "function": {"name": "saat"}}])
    parts.feed(
        [{"index": 0, "function": {"arguments": '"EUR"}'}}, {"index": 1, "function": {"arguments": '{"tz": "Eu'}}]
    )
    whole, cut = parts.calls("r1", finish_reason="length")
    assert (whole.id, whole.name, whole.arguments, whole.invalid) == ("c0", "kur", {"ccy": "EUR"}, None)
    assert cut.name == "saat" and cut.arguments == {} and cut.invalid is not None and "cut off" in cut.invalid
    assert cut.id  # an id of our own when the server sends none
    bad = ToolCallParts()
    bad.feed([{"index": 0, "function": {"name": "kur", "arguments": "[1]"}}])
    assert bad.calls("r", "stop")[0].invalid == "the arguments are not a JSON object"


@pytest.mark.parametrize(
    ("status", "body", "tools", "error", "says"),
    [
        (400, {"error": {"message": "request exceeds the available context size", "type": "exceed_context_size_error"}},
         False, BadRequest, "context window"),
        (400, {"error": {"message": "maximum context length is 2048 tokens"}}, False, BadRequest, "context"),
        (500, {"error": {"message": "tools param requires --jinja flag"}}, True, UpstreamError, "--jinja"),
        (404, {"error": {"message": "model not found"}}, False, ModelNotFound, "/v1/models"),
        (401, {"error": "no key"}, False, UpstreamError, "MODEL_API_KEY"),
        (503, {"error": {"message": "Loading model"}}, False, DependencyDown, "not ready"),
        (500, "plain failure", False, UpstreamError, "HTTP 500: plain failure"),
    ],
)  # fmt: skip
def test_errors_are_mapped_to_clear_messages(
    status: int, body: object, tools: bool, error: type[Exception], says: str
) -> None:
    text = body if isinstance(body, str) else json.dumps(body)
    exc = error_for(status, text, request(tools), "http://gpu:8080")
    assert type(exc) is error and says in exc.message


def test_model_protocol_chooses_the_direct_backend() -> None:
    ollama = direct_backend(Settings(ollama_url="http://o:11434"))
    openai = direct_backend(Settings(model_protocol="openai", model_url="http://v:8000/", model_api_key=SecretStr("k")))
    assert isinstance(ollama, OllamaBackend) and ollama.url == "http://o:11434"
    assert isinstance(openai, OpenAICompatBackend) and openai.url == "http://v:8000"
    assert openai.http.headers["authorization"] == "Bearer k"
