"""Regression (issue 26, finding 7): signals that misled.

- A 429 said "The agent failed while answering": now it names the limit that was hit (the user's rate per
  minute, the full GPU queue, a front-end task not queued while users wait) and when to retry, in the
  client's own error language (OpenAI error object on /v1, Ollama `{"error": "..."}` on /api), with
  `Retry-After` agreeing with the text.
- A client who left before the first token was an error-level CancelledError traceback and counted as a
  500: now one info line `client_left`, status 499 and outcome `client_left` in the request metric.
- The OpenAPI document had no security scheme, none of the error answers and /metrics as JSON.

(local-agent's admin key shown once: tests/integration/test_local_agent.py.)
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent.errors import AgentError
from agent.queue.depth import refusal
from agent.security.auth import add_key
from tests.integration.conftest import FakeOllama, McpServer, agent_env
from tests.support.procs import Proc, free_port, running, wait_until
from tests.unit.agent.security.test_auth import ASK, POLICY, api, bearer, settings_for

SHAPES = {"/v1/chat/completions": "openai", "/api/chat": "ollama"}


def text_of(resp: httpx.Response, path: str) -> str:
    body = resp.json()
    return str(body["error"]["message"] if SHAPES[path] == "openai" else body["error"])


def retry_in(text: str) -> int:
    found = re.search(r"[Tt]ry again in (?:about )?(\d+) s", text)
    assert found, text
    return int(found.group(1))


@pytest.fixture
def tmp(tmp_path: Path) -> Path:
    (tmp_path / "policy.yaml").write_text(POLICY)
    return tmp_path


@pytest.mark.parametrize("path", SHAPES)
async def test_the_rate_limit_429_names_the_limit_and_the_wait(tmp: Path, path: str) -> None:
    key = add_key(tmp / "keys.yaml", "alice", "guest")
    settings = settings_for(tmp, rate_limit_per_minute=2, rate_limit_backend="memory")
    async with api(settings) as (http, _):
        for _ in range(2):
            assert (await http.post(path, json=ASK | {"stream": False}, headers=bearer(key))).status_code == 200
        refused = await http.post(path, json=ASK | {"stream": False}, headers=bearer(key))
    assert refused.status_code == 429
    text = text_of(refused, path)
    assert "failed while answering" not in text
    assert "at most 2 requests per minute per user" in text
    assert 1 <= retry_in(text) == int(refused.headers["Retry-After"]) <= 60
    if SHAPES[path] == "openai":
        assert refused.json()["error"]["type"] == "rate_limit_error"
        assert refused.json()["error"]["code"] == "rate_limited"


QUEUE_LIMITS = [(False, "queue_full", "GPU queue is full"), (True, "client_task_refused", "background task")]


@pytest.mark.parametrize("path", SHAPES)
@pytest.mark.parametrize(("task", "code", "says"), QUEUE_LIMITS)
async def test_the_queue_429s_say_which_limit_and_when(tmp: Path, path: str, task: bool, code: str, says: str) -> None:
    error = refusal(task, depth=4, max_depth=3, wait=17)  # what the GPU queue raises (agent.queue.client)
    async with api(settings_for(tmp, agent_auth="none"), [error]) as (http, _):
        refused = await http.post(path, json=ASK | {"stream": False})
    assert refused.status_code == 429 and refused.headers["Retry-After"] == "17"
    text = text_of(refused, path)
    assert says in text and retry_in(text) == 17 and "failed while answering" not in text
    assert "rate limit" not in text or "not your rate limit" in text
    if SHAPES[path] == "openai":
        assert refused.json()["error"]["code"] == code


def test_every_429_the_agent_raises_is_for_the_client_to_read() -> None:
    from agent.security.ratelimit import RateLimited

    for cls in (RateLimited, type(refusal(False, 1, 1, 1)), type(refusal(True, 1, 1, 1))):
        assert cls.status == 429 and cls.public is None, cls  # no generic "the agent failed" text
        assert issubclass(cls, AgentError)


FIRST_TOKEN_AFTER = 6.0


@pytest.fixture
def lone_api(fake_ollama: FakeOllama, mcp_server: McpServer) -> Iterator[tuple[str, Proc]]:
    port = free_port()
    with running(
        ["agent-api"], env=agent_env(fake_ollama.url, mcp_server, port), ready_url=f"http://127.0.0.1:{port}/healthz"
    ) as proc:
        yield f"http://127.0.0.1:{port}", proc


@pytest.mark.integration
@pytest.mark.parametrize("path", SHAPES)
def test_a_client_who_left_before_the_first_token_is_an_info_line_and_a_metric(
    lone_api: tuple[str, Proc], ollama: FakeOllama, path: str
) -> None:
    url, proc = lone_api
    ollama.script(default={"content": "word " * 20}, first_token_delay=FIRST_TOKEN_AFTER)
    body = {"model": "qwen2.5:3b", "messages": [{"role": "user", "content": "slow start"}], "stream": True}
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{url}{path}", json=body, timeout=1.0)
    series = f'agent_request_duration_seconds_count{{endpoint="{path}",outcome="client_left",status="499"}} 1.0'
    wait_until(lambda: series in httpx.get(f"{url}/metrics", timeout=5).text, timeout=10, what="the client_left count")
    lines = [json.loads(line) for line in proc.output().splitlines() if line.startswith("{")]
    left = [line for line in lines if line.get("event") == "client_left"]
    assert left and left[-1]["level"] == "info" and left[-1]["endpoint"] == path
    assert "CancelledError" not in proc.output() and "Exception in ASGI application" not in proc.output()
    assert not [line for line in lines if line.get("level") in ("error", "critical")]
    assert '",status="500"' not in httpx.get(f"{url}/metrics", timeout=5).text


async def test_the_openapi_document_declares_security_every_status_and_the_metrics_type(tmp: Path) -> None:
    key = add_key(tmp / "keys.yaml", "alice", "guest")
    async with api(settings_for(tmp)) as (http, _):
        schema: dict[str, Any] = (await http.get("/openapi.json", headers=bearer(key))).json()
    assert schema["components"]["securitySchemes"]["bearer"] == {
        "type": "http",
        "scheme": "bearer",
        "description": "an API key from `agent-admin keys add`",
    }
    paths = schema["paths"]
    for path in ("/v1/chat/completions", "/api/chat"):
        chat = paths[path]["post"]
        assert chat["security"] == [{"bearer": []}]
        assert {"400", "401", "403", "404", "413", "415", "429", "503", "504"} <= set(chat["responses"])
        shape = "OllamaError" if path.startswith("/api/") else "OpenAIError"
        assert chat["responses"]["429"]["content"]["application/json"]["schema"]["$ref"].endswith(shape)
        assert "422" not in chat["responses"]
    assert "404" in paths["/v1/models/{model_id}"]["get"]["responses"]
    assert paths["/readyz"]["get"]["security"] == [] and "503" in paths["/readyz"]["get"]["responses"]
    assert paths["/v1/agent/info"]["get"]["security"] == [{"bearer": []}]
    metrics = paths["/metrics"]["get"]
    assert metrics["security"] == [] and list(metrics["responses"]["200"]["content"]) == [
        "text/plain; version=1.0.0; charset=utf-8"
    ]
