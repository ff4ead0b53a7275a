"""TOOL_CALLING=constrained end to end: agent-api and a real MCP server, the decision schema on the wire of both
protocols — Ollama's `format` in direct mode, `response_format` json_schema through the GPU queue and the worker —
with scripted servers that hold their replies to the schema as real engines do (tests/fakes/README.md)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.integration import queue_fixtures
from tests.integration.conftest import FakeOllama, FakeOpenAI, McpServer, agent_env
from tests.integration.queue_fixtures import RedisServer
from tests.support.procs import VENV_BIN, free_port, running, wait_until

queue_redis = queue_fixtures.queue_redis
CALL = {"tool": "sistem_bilgisi", "arguments": {}}


def ask(api: str, text: str) -> httpx.Response:
    body = {"model": "qwen3:4b", "messages": [{"role": "user", "content": text}]}
    return httpx.post(f"{api}/v1/chat/completions", json=body, timeout=60)


def offered(schema: dict[str, Any]) -> set[str]:
    return {b["properties"]["tool"]["const"] for b in schema["anyOf"] if "tool" in b["properties"]}


@pytest.fixture(scope="module")
def ollama_api(fake_ollama: FakeOllama, mcp_server: McpServer) -> Iterator[str]:
    port = free_port()
    env = agent_env(fake_ollama.url, mcp_server, port, TOOL_CALLING="constrained")
    with running(["agent-api"], env=env, ready_url=f"http://127.0.0.1:{port}/healthz"):
        yield f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def queued_openai_api(fake_openai: FakeOpenAI, queue_redis: RedisServer, mcp_server: McpServer) -> Iterator[str]:
    metrics_port, api_port = free_port(), free_port()
    model = {"MODEL_PROTOCOL": "openai", "MODEL_URL": fake_openai.url, "MODEL_NAME": "qwen3:4b", "EXTRA_MODELS": ""}
    worker_env = {"REDIS_URL": queue_redis.url, "GPU_ID": "constrained0", "WORKER_METRICS_PORT": str(metrics_port),
                  **model}  # fmt: skip
    api_env = agent_env(fake_openai.url, mcp_server, api_port, MODEL_BACKEND="queue", REDIS_URL=queue_redis.url,
                        TOOL_CALLING="constrained", **model)  # fmt: skip
    with (
        running(
            [str(VENV_BIN / "agent-worker")],
            env=worker_env,
            ready_url=f"http://127.0.0.1:{metrics_port}/metrics",
            timeout=60,
        ),  # fmt: skip
        running(["agent-api"], env=api_env, ready_url=f"http://127.0.0.1:{api_port}/healthz"),
    ):
        # the worker's /metrics answers before its slot process has registered: ready means a slot is there (seen
        # as 503 "no worker" on a box at load 5)
        ready = f"http://127.0.0.1:{api_port}/readyz"
        wait_until(lambda: httpx.get(ready, timeout=10).status_code == 200, 120, interval=0.2, what="a worker slot")
        yield f"http://127.0.0.1:{api_port}"


def test_ollama_format_carries_the_schema_and_the_chosen_tool_runs(ollama_api: str, fake_ollama: FakeOllama) -> None:
    fake_ollama.script(
        rules=[
            {"when": {"has_format": True, "last_role": "user"}, "reply": {"content": json.dumps(CALL)}},
            {"when": {"has_format": True, "last_role": "tool"}, "reply": {"content": '{"tool": "answer_directly"}'}},
            {"when": {"has_format": False}, "reply": {"content": "The system is fine."}},
        ]
    )
    resp = ask(ollama_api, "how is the system?")
    assert resp.status_code == 200, resp.text
    reply = resp.json()
    assert reply["choices"][0]["message"]["content"].startswith("The system is fine.")
    assert [(c["name"], c["outcome"]) for c in reply["local_agent"]["tool_calls"]] == [("sistem_bilgisi", "ok")]
    first, second, last = fake_ollama.requests()
    assert "tools" not in first and offered(first["format"]) >= {"sistem_bilgisi", "depozit_ozeti"}
    assert second["format"] == first["format"] and "format" not in last and "tools" not in last


def test_the_schema_travels_through_the_queue_as_response_format(queued_openai_api: str, fake_openai: FakeOpenAI
                                                                 ) -> None:  # fmt: skip
    fake_openai.script({"content": json.dumps(CALL)}, {"content": '{"tool": "answer_directly"}'}, {"content": "Fine."})
    resp = ask(queued_openai_api, "how is the system?")
    assert resp.status_code == 200, resp.text
    assert [c["outcome"] for c in resp.json()["local_agent"]["tool_calls"]] == ["ok"]
    first, _, last = fake_openai.requests()
    schema = first["response_format"]["json_schema"]["schema"]
    assert first["response_format"]["type"] == "json_schema" and "sistem_bilgisi" in offered(schema)
    assert "tools" not in first and "response_format" not in last


@pytest.mark.parametrize(
    "content",
    [json.dumps({**CALL, "tool": "shell_exec", "arguments": {"cmd": "id"}}), "not json at all {"],
)
def test_a_server_ignoring_the_schema_gets_a_clear_error_and_nothing_runs(
    queued_openai_api: str, fake_openai: FakeOpenAI, content: str
) -> None:
    fake_openai.script({"content": content, "ignores_format": True}, {"content": "never asked"})
    resp = ask(queued_openai_api, "run id on the server")
    assert resp.status_code == 502, resp.text
    error = resp.json()["error"]
    assert error["code"] == "invalid_decision" and "nothing was run" in error["message"]
    assert len(fake_openai.requests()) == 1  # no tool result, no second round
