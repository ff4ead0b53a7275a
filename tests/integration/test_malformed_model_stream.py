"""A model server that sends a line that is not JSON: the same clear 502 in direct mode and through the GPU queue.

Before, direct mode let the JSON parser's ValueError out (a plain-text 500) while the worker wrapped it as
"agent-worker failed: JSONDecodeError ..."; now both raise the backend's UpstreamError, which names the line.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from tests.integration import queue_fixtures
from tests.integration.conftest import AgentApi, FakeOllama, McpServer, agent_env
from tests.integration.queue_fixtures import Workers
from tests.support.procs import Proc, free_port, running, wait_until

queue_redis = queue_fixtures.queue_redis
queue_fake = queue_fixtures.queue_fake
queue_workers = queue_fixtures.queue_workers

BROKEN = '{"model":"qwen3:4b","message":{"content":"cut'
REPLY = {"content": "one two three", "stream_error": {"after_tokens": 1, "line": BROKEN}}
CHAT = {"model": "qwen3:4b", "messages": [{"role": "user", "content": "hello"}]}
LOGGED = "Ollama sent a malformed stream line (not JSON"


def assert_clear_502(url: str, api: Proc) -> None:
    seen = len(api.output())  # the session's agent-api has logged other tests' failures before
    resp = httpx.post(f"{url}/v1/chat/completions", json=CHAT, timeout=60)
    assert resp.status_code == 502, resp.text
    error = resp.json()["error"]
    assert error["code"] == "upstream_error" and error["message"].startswith("The model failed while answering")
    assert BROKEN not in resp.text  # the raw line is for the operator's log, not the chat window
    wait_until(lambda: failure_logged(api, seen) is not None, timeout=10, what="request_failed in the API log")
    message = failure_logged(api, seen)
    assert message is not None and message.startswith(LOGGED) and message.endswith(repr(BROKEN))


def failure_logged(api: Proc, seen: int) -> str | None:
    """The operator's message in the API's first request_failed log line after `seen`, if written yet."""
    for line in api.output()[seen:].splitlines():
        if line.startswith("{") and '"request_failed"' in line:
            return str(json.loads(line)["message"])
    return None


def test_direct_mode(agent_api: AgentApi, ollama: FakeOllama) -> None:
    ollama.script(default=REPLY)
    assert_clear_502(agent_api.url, agent_api.proc)


@pytest.fixture
def queued_api(queue_workers: Workers, mcp_server: McpServer) -> Iterator[tuple[str, Proc]]:
    port = free_port()
    env = agent_env(
        queue_workers.ollama_url, mcp_server, port, MODEL_BACKEND="queue", REDIS_URL=queue_workers.redis.url
    )
    with running(["agent-api"], env=env, ready_url=f"http://127.0.0.1:{port}/healthz") as proc:
        yield f"http://127.0.0.1:{port}", proc


def test_queue_mode(queued_api: tuple[str, Proc], queue_workers: Workers) -> None:
    queue_workers.start()
    queue_workers.fake.script({"default": REPLY})
    url, api = queued_api
    assert_clear_502(url, api)
    assert "agent-worker failed" not in api.output()  # the worker relays the backend's own error, not a crash
