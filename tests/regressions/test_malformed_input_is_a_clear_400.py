"""Regression (issue 11, item 5): malformed bodies gave plain 500s with tracebacks and no audit record —
JSON nested ~1000 levels (body or tool-call arguments), `tool_calls[].id` as an object or list, a
non-object `stream_options` with streaming, a lone surrogate (which had already queued a GPU round).
Every one must be a 400 in the route's error shape, audited, before anything reaches the model."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.conftest import FakeOllama, McpServer, agent_env
from tests.support.procs import free_port, running

pytestmark = pytest.mark.integration
DEEP = 1000


def body(messages: Any, **extra: Any) -> bytes:
    return json.dumps({"model": "qwen3:4b", "messages": messages, **extra}).encode()


def user(content: Any) -> list[dict[str, Any]]:
    return [{"role": "user", "content": content}]


def with_call(call: dict[str, Any]) -> list[dict[str, Any]]:
    return [*user("hi"), {"role": "assistant", "content": "", "tool_calls": [call]}, *user("and?")]


def fn(arguments: Any = "{}", name: Any = "sistem_bilgisi", **extra: Any) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "arguments": arguments}, **extra}


HOSTILE: dict[str, bytes] = {
    "deep_body": b'{"model":"qwen3:4b","messages":' + b"[" * DEEP + b"]" * DEEP + b"}",
    "deep_content": body(user(json.loads("[" * 200 + "]" * 200))),
    "deep_arguments_string": body(with_call(fn("[" * DEEP + "]" * DEEP))),
    "deep_arguments_object": body(with_call(fn(json.loads('{"a":' * 200 + "1" + "}" * 200)))),
    "id_object": body(with_call(fn(id={"x": 1}))),
    "id_list": body(with_call(fn(id=[1, 2]))),
    "name_object": body(with_call(fn(name={"x": 1}))),
    "tool_call_id_object": body([*user("hi"), {"role": "tool", "content": "x", "tool_call_id": {"a": 1}}]),
    "tool_name_list": body([*user("hi"), {"role": "tool", "content": "x", "tool_name": ["a"]}]),
    "stream_options_string": body(user("hi"), stream=True, stream_options="include_usage"),
    "stream_options_list": body(user("hi"), stream=True, stream_options=[1]),
    "stream_string": body(user("hi"), stream="yes"),
    "lone_surrogate": b'{"model":"qwen3:4b","messages":[{"role":"user","content":"a\\ud800b"}]}',
    "lone_surrogate_in_key": b'{"model":"qwen3:4b","messages":[{"role":"user","content":"a","\\udc00":1}]}',
    "nul_in_content": body(user("a\u0000b")),
    "invalid_utf8": b'{"model":"qwen3:4b","messages":[{"role":"user","content":"\xff\xfe"}]}',
    "model_object": json.dumps({"model": {"a": 1}, "messages": user("hi")}).encode(),
    "messages_object": json.dumps({"model": "qwen3:4b", "messages": {"role": "user"}}).encode(),
    "role_object": body([{"role": {"a": 1}, "content": "hi"}]),
    "content_number": body(user(12)),
    "tool_calls_object": body([*user("hi"), {"role": "assistant", "content": "", "tool_calls": {"a": 1}}]),
}


@pytest.fixture(scope="module")
def api(
    fake_ollama: FakeOllama, mcp_server: McpServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Path]]:
    port, audit = free_port(), tmp_path_factory.mktemp("audit")
    env = agent_env(fake_ollama.url, mcp_server, port, AUDIT_DIR=str(audit))
    with running(["agent-api"], env=env, ready_url=f"http://127.0.0.1:{port}/healthz"):
        yield f"http://127.0.0.1:{port}", audit / "audit.jsonl"


def records(audit: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in audit.read_text().splitlines()] if audit.exists() else []


OPENAI_ONLY = {"stream_options_string", "stream_options_list"}  # Ollama's API has no stream_options: ignored there
CASES = [
    (c, p)
    for c in sorted(HOSTILE)
    for p in ("/v1/chat/completions", "/api/chat")
    if p != "/api/chat" or c not in OPENAI_ONLY
]


@pytest.mark.parametrize(("case", "path"), CASES)
def test_a_malformed_body_is_a_400_in_the_routes_shape_audited_and_never_queued(
    api: tuple[str, Path], ollama: FakeOllama, case: str, path: str
) -> None:
    url, audit = api
    before = len(records(audit))
    resp = httpx.post(url + path, content=HOSTILE[case], headers={"Content-Type": "application/json"}, timeout=30)
    assert resp.status_code == 400, resp.text[:300]
    error = resp.json()["error"]
    if path == "/api/chat":
        assert isinstance(error, str) and "Traceback" not in error
    else:
        assert set(error) == {"message", "type", "param", "code"} and error["type"] == "invalid_request_error"
    new = records(audit)[before:]
    assert [(r["endpoint"], r["status"]) for r in new] == [(path, 400)]
    assert ollama.requests() == []
