"""agent-api with its default backend, the GPU queue: HTTP → Redis/RQ → agent-worker → scripted Ollama."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import openai
import pytest

from tests.integration import queue_fixtures
from tests.integration.conftest import McpServer, agent_env
from tests.integration.queue_fixtures import Workers
from tests.support.procs import free_port, running, wait_until
from tests.support.readiness import details

queue_redis = queue_fixtures.queue_redis
queue_fake = queue_fixtures.queue_fake
queue_workers = queue_fixtures.queue_workers

RULE = {
    "when": {"user_contains": "what time", "last_role": "user"},
    "reply": {"tool_calls": [{"name": "sistem_bilgisi", "arguments": {}}]},
}


@pytest.fixture
def queued_api(queue_workers: Workers, mcp_server: McpServer) -> Iterator[str]:
    port = free_port()
    env = agent_env(
        queue_workers.ollama_url,
        mcp_server,
        port,
        MODEL_BACKEND="queue",
        REDIS_URL=queue_workers.redis.url,
        MAX_QUEUE_DEPTH="1",
        THINK_HOLDBACK_MODELS="",
    )
    with running(["agent-api"], env=env, ready_url=f"http://127.0.0.1:{port}/healthz"):
        yield f"http://127.0.0.1:{port}"


def test_streamed_tool_answer_through_the_queue(queued_api: str, queue_workers: Workers) -> None:
    queue_workers.start()
    queue_workers.fake.script({"rules": [RULE]})
    with openai.OpenAI(base_url=f"{queued_api}/v1", api_key="x", max_retries=0) as sdk:
        chunks = list(
            sdk.chat.completions.create(
                model="qwen3:4b", stream=True, messages=[{"role": "user", "content": "What time is it?"}]
            )
        )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text.startswith("According to the tool:") and text.endswith("Tools used: sistem_bilgisi")
    assert sum(1 for c in chunks if c.choices and c.choices[0].delta.content) > 3
    ready = httpx.get(f"{queued_api}/readyz", timeout=10).json()
    assert ready["checks"]["model"] == "ready"


def test_no_worker_is_a_clear_503(queued_api: str) -> None:
    resp = httpx.post(
        f"{queued_api}/v1/chat/completions",
        timeout=30,
        json={"model": "qwen3:4b", "messages": [{"role": "user", "content": "hi"}]},
    )
    assert resp.status_code == 503
    assert "unavailable" in resp.json()["error"]["message"] and "redis://" not in resp.text  # no internal address
    assert "no agent-worker is running" in details(queued_api)["model"]["detail"]  # the operator's detail


async def test_full_queue_is_429_with_retry_after_and_no_sdk_retry(queued_api: str, queue_workers: Workers) -> None:
    queue_workers.start()
    queue_workers.fake.script({"default": {"content": "slow answer " * 5, "token_delay": 0.3}})
    body = {"model": "qwen3:4b", "messages": [{"role": "user", "content": "hi"}]}
    async with httpx.AsyncClient(timeout=30) as http:
        # one round generating, one waiting (MAX_QUEUE_DEPTH=1): the third is refused
        running_one = asyncio.create_task(http.post(f"{queued_api}/v1/chat/completions", json=body))
        await asyncio.to_thread(wait_until, lambda: queue_workers.fake.stats()["active"] == 1)
        waiting_one = asyncio.create_task(http.post(f"{queued_api}/api/chat", json={**body, "stream": False}))
        await asyncio.to_thread(wait_until, lambda: len(queue_fixtures.queued(queue_workers)) == 1)
        refused = await http.post(f"{queued_api}/v1/chat/completions", json=body)
        assert refused.status_code == 429
        assert int(refused.headers["Retry-After"]) >= 1
        assert refused.headers["x-should-retry"] == "false"
        assert refused.json()["error"]["code"] == "queue_full"
        said = refused.json()["error"]["message"]  # which limit, and the wait the header gives
        assert "GPU queue is full" in said and f"try again in about {refused.headers['Retry-After']} s" in said
        assert (await running_one).status_code == 200
        assert (await waiting_one).status_code == 200
    assert queue_workers.fake.stats()["peak"] == 1


async def test_streaming_client_gone_while_queued_takes_its_round_off_the_queue(
    queued_api: str, queue_workers: Workers
) -> None:
    """Issue 11 item 4 through the GPU queue: a streaming client that leaves before its first token must not
    leave its round behind to run on the GPU later."""
    queue_workers.start()
    queue_workers.fake.script({"default": {"content": "slow answer " * 10, "token_delay": 0.5}})
    busy = {"model": "qwen3:4b", "messages": [{"role": "user", "content": "keep the GPU busy"}]}
    leaver = {"model": "qwen3:4b", "stream": True, "messages": [{"role": "user", "content": "left in the queue"}]}
    async with httpx.AsyncClient(timeout=30) as http:
        running_one = asyncio.create_task(http.post(f"{queued_api}/v1/chat/completions", json=busy))
        await asyncio.to_thread(wait_until, lambda: queue_workers.fake.stats()["active"] == 1)
        with pytest.raises(httpx.ReadTimeout):  # queued behind the busy round: no byte before it gives up
            await http.post(f"{queued_api}/v1/chat/completions", json=leaver, timeout=1.5)
        await asyncio.to_thread(wait_until, lambda: not queue_fixtures.queued(queue_workers), timeout=5)
        assert queue_workers.fake.stats()["active"] == 1  # taken off while the busy round still generates
        assert (await running_one).status_code == 200
    reached = [r for r in queue_workers.fake.requests() if "left in the queue" in str(r.get("messages"))]
    assert reached == []
