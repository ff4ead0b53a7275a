"""Regression (issue 11, item 3): under concurrency the Redis limiter failed open (150 concurrent requests,
limit 30/min → 54 admitted: its pool ran dry and an error meant "let it through"). Now the limit holds
exactly across two agent-api processes sharing Redis, and a limiter that cannot decide refuses with 503."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis

from agent.security.auth import add_key
from tests.integration.conftest import FakeOllama, McpServer, agent_env
from tests.support.procs import Proc, free_port, redis_server_cmd, running, start

pytestmark = pytest.mark.integration
LIMIT, REQUESTS = 20, 120
BODY = {"model": "qwen3:4b", "messages": [{"role": "user", "content": "hi"}]}


@contextlib.contextmanager
def limited_agent(ollama: FakeOllama, mcp: McpServer, tmp: Path, redis_port: int) -> Iterator[str]:
    port = free_port()
    env = agent_env(
        ollama.url,
        mcp,
        port,
        AGENT_AUTH="api_key",
        AGENT_KEYS_FILE=str(tmp / "keys.yaml"),
        AUDIT_DIR=str(tmp / "audit"),
        RATE_LIMIT_PER_MINUTE=str(LIMIT),
        RATE_LIMIT_BACKEND="redis",
        REDIS_URL=f"redis://127.0.0.1:{redis_port}/0",
    )
    with running(["agent-api"], env=env, ready_url=f"http://127.0.0.1:{port}/healthz"):
        yield f"http://127.0.0.1:{port}"


@contextlib.contextmanager
def redis_at(port: int, tmp: Path) -> Iterator[Proc]:
    with running(redis_server_cmd(port, tmp), ready=lambda: bool(redis.Redis(port=port).ping())) as proc:
        yield proc


async def burst(urls: list[str], key: str) -> Counter[int]:
    limits = httpx.Limits(max_connections=REQUESTS)
    async with httpx.AsyncClient(timeout=60, limits=limits, headers={"Authorization": f"Bearer {key}"}) as http:
        replies = await asyncio.gather(
            *(http.post(f"{urls[i % len(urls)]}/v1/chat/completions", json=BODY) for i in range(REQUESTS))
        )
    return Counter(r.status_code for r in replies)


def test_concurrent_requests_across_two_processes_admit_exactly_the_limit(
    ollama: FakeOllama, mcp_server: McpServer, tmp_path: Path
) -> None:
    key = add_key(tmp_path / "keys.yaml", "one-key", "guest")
    redis_port = free_port()
    with (
        redis_at(redis_port, tmp_path),
        limited_agent(ollama, mcp_server, tmp_path, redis_port) as first,
        limited_agent(ollama, mcp_server, tmp_path, redis_port) as second,
    ):
        # a Redis that answers slowly for a moment (as under load): the limiter waits, it never guesses
        redis.Redis(port=redis_port).client_pause(1500, all=False)  # CLIENT PAUSE 1500 WRITE
        statuses = asyncio.run(burst([first, second], key))
    assert statuses[200] == LIMIT
    assert statuses[200] + statuses[429] + statuses[503] == REQUESTS
    assert len(ollama.requests()) == LIMIT


def test_a_limiter_without_redis_refuses_with_a_clear_503(
    ollama: FakeOllama, mcp_server: McpServer, tmp_path: Path
) -> None:
    key = add_key(tmp_path / "keys.yaml", "one-key", "guest")
    redis_port = free_port()
    redis_proc = start(redis_server_cmd(redis_port, tmp_path), ready=lambda: bool(redis.Redis(port=redis_port).ping()))
    with limited_agent(ollama, mcp_server, tmp_path, redis_port) as url:
        redis_proc.stop()
        resp = httpx.post(
            f"{url}/v1/chat/completions", json=BODY, headers={"Authorization": f"Bearer {key}"}, timeout=30
        )
    assert resp.status_code == 503, resp.text
    assert "rate limit" in resp.json()["error"]["message"].lower()
    assert ollama.requests() == []
    record = json.loads((tmp_path / "audit" / "audit.jsonl").read_text().splitlines()[-1])
    assert (record["status"], record["user"]) == (503, "one-key")
