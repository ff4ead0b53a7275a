"""The GPU queue when things break: a killed worker, no worker, a missing model, Redis restarting, timeouts."""

from __future__ import annotations

import asyncio
import dataclasses
import time

import pytest
from prometheus_client import REGISTRY

from agent.backends.base import TextDelta
from agent.errors import DependencyDown, ModelNotFound, QueueTimeout, UpstreamTimeout
from agent.queue import registry
from tests.integration import queue_fixtures
from tests.integration.queue_fixtures import Workers, answer, open_backend, queued, request
from tests.support.procs import wait_until

pytestmark = pytest.mark.integration
queue_redis, queue_fake, queue_workers = (
    queue_fixtures.queue_redis,
    queue_fixtures.queue_fake,
    queue_fixtures.queue_workers,
)


async def test_worker_killed_mid_round_fails_fast_and_a_restarted_worker_serves(queue_workers: Workers) -> None:
    queue_workers.fake.script({"default": {"content": " ".join(["tok"] * 100)}, "token_delay": 0.05})
    worker = queue_workers.start()
    async with open_backend(queue_workers) as backend:
        stream = backend.stream_round(request("doomed"))
        event = await anext(stream)
        while not isinstance(event, TextDelta):
            event = await anext(stream)
        queue_workers.kill(worker)
        killed = time.monotonic()
        with pytest.raises(DependencyDown, match="agent-worker stopped mid-round"):
            async for _ in stream:
                pass
        assert time.monotonic() - killed < 8
        # The killed worker's connection to Ollama closed, so Ollama stopped generating.
        await asyncio.to_thread(wait_until, lambda: queue_workers.fake.stats()["active"] == 0, 5.0)
        assert queued(queue_workers) == []
        queue_workers.fake.script({"default": {"content": "back"}})
        queue_workers.start()
        assert await answer(backend, request("after restart")) == "back"


async def test_round_is_retried_once_when_its_worker_dies_before_the_first_token(queue_workers: Workers) -> None:
    queue_workers.fake.script(
        {
            "rules": [
                {"when": {"user_contains": "retry"}, "times": 1, "reply": {"content": "never", "first_token_delay": 30}}
            ],
            "default": {"content": "second try"},
        }
    )
    workers = [queue_workers.start(), queue_workers.start()]
    async with open_backend(queue_workers) as backend:
        pending = asyncio.create_task(answer(backend, request("retry me")))
        await asyncio.to_thread(wait_until, lambda: queue_workers.fake.stats()["active"] == 1, 10.0)
        await asyncio.to_thread(wait_until, lambda: any("round_started" in w.output() for w in workers), 5.0)
        queue_workers.kill(next(w for w in workers if "round_started" in w.output()))
        assert await asyncio.wait_for(pending, 30) == "second try"
    assert queue_workers.fake.stats()["peak"] == 1


async def test_no_worker_fails_at_once_with_a_clear_message(queue_workers: Workers) -> None:
    async with open_backend(queue_workers) as backend:
        started = time.monotonic()
        with pytest.raises(DependencyDown, match="no agent-worker is running"):
            await answer(backend, request("anyone?"))
        assert time.monotonic() - started < 2
        status = await backend.status()
        assert not status.reachable and "no agent-worker is running" in status.detail
    assert queued(queue_workers) == []


async def test_a_restarting_worker_costs_latency_not_the_answer(queue_workers: Workers) -> None:
    """The only worker killed and started again (a crash, `docker compose restart agent-worker`): a question asked
    while none is live waits for the new one instead of failing "no agent-worker is running"."""
    queue_workers.fake.script({"default": {"content": "answered"}})
    worker = queue_workers.start()
    async with open_backend(queue_workers) as backend:
        assert await answer(backend, request("before")) == "answered"  # the API has seen a worker
        queue_workers.kill(worker)
        await asyncio.to_thread(wait_until, lambda: queue_workers.statuses() == [], 15.0, what="its status lapsed")
        asked = asyncio.create_task(answer(backend, request("while it restarts")))
        await asyncio.to_thread(wait_until, lambda: len(queued(queue_workers)) == 1, 10.0, what="the round queued")
        assert not asked.done()
        queue_workers.start()
        assert await asyncio.wait_for(asked, 60) == "answered"


async def test_a_worker_that_does_not_come_back_is_reported_after_the_grace(
    queue_workers: Workers, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(registry, "WORKER_RESTART_GRACE", 2.0)
    worker = queue_workers.start()
    async with open_backend(queue_workers) as backend:
        assert await backend.workers.live(fresh=True)  # the API has seen a worker
        queue_workers.kill(worker)
        # its status outlives it a few seconds: the round is admitted, then fails once none was seen for the grace
        with pytest.raises(DependencyDown, match="no agent-worker is running"):
            await asyncio.wait_for(answer(backend, request("anyone left?")), 30)
        await asyncio.to_thread(wait_until, lambda: queued(queue_workers) == [], 10.0, what="the round taken off")
        no_worker = {"reason": "no_worker"}
        refused = REGISTRY.get_sample_value("agent_rejected_total", no_worker) or 0.0
        with pytest.raises(DependencyDown, match="no agent-worker is running"):  # past the grace: refused, not queued
            await answer(backend, request("still nobody?"))
        assert REGISTRY.get_sample_value("agent_rejected_total", no_worker) == refused + 1


async def test_missing_model_is_reported_by_status_and_by_the_round(queue_workers: Workers) -> None:
    queue_workers.start(MODEL_NAME="llama3.2:1b")  # not in the fake's model list
    async with open_backend(queue_workers) as backend:
        await asyncio.to_thread(wait_until, lambda: "missing" in str(queue_workers.statuses()), 10.0)
        status = await backend.status()
        assert status.reachable and "qwen3:4b" in status.models
        assert "model llama3.2:1b missing" in status.detail and "ollama pull llama3.2:1b" in status.detail
        missing = dataclasses.replace(request("hi"), model="llama3.2:1b")
        with pytest.raises(ModelNotFound, match=r"ollama pull llama3\.2:1b"):
            await answer(backend, missing)


async def test_redis_gone_past_the_reconnect_wait_gives_a_clear_error_then_recovers(queue_workers: Workers) -> None:
    """Redis away longer than REDIS_RECONNECT_SECONDS (shipped default): a clear error, bounded by that wait; then the
    same backend serves again once Redis is back (the short blip a restart makes: test_queue_redis_blips)."""
    queue_workers.fake.script({"default": {"content": "alive"}})
    queue_workers.start()
    async with open_backend(queue_workers) as backend:
        assert await answer(backend, request("before")) == "alive"
        queue_workers.redis.stop()
        started = time.monotonic()
        with pytest.raises(DependencyDown, match=r"Redis unreachable at redis://127\.0\.0\.1"):
            await answer(backend, request("during"))
        assert time.monotonic() - started < backend.settings.redis_reconnect_seconds + 10
        queue_workers.redis.start()
        deadline = time.monotonic() + 30
        while True:
            try:
                assert await answer(backend, request("after")) == "alive"
                break
            except DependencyDown:  # until the worker has reconnected and published its heartbeat
                assert time.monotonic() < deadline, "no recovery within 30 s of Redis coming back"
                await asyncio.sleep(0.2)


async def test_round_waiting_past_the_queue_timeout_fails_with_queue_timeout(queue_workers: Workers) -> None:
    queue_workers.fake.script(
        {
            "rules": [{"when": {"user_contains": "hog"}, "reply": {"content": "done", "first_token_delay": 4}}],
            "default": {"content": "ok"},
        }
    )
    queue_workers.start()
    async with open_backend(queue_workers, queue_timeout_seconds=1.5) as backend:
        hog = asyncio.create_task(answer(backend, request("hog")))
        await asyncio.to_thread(wait_until, lambda: queue_workers.fake.stats()["active"] == 1, 10.0)
        with pytest.raises(QueueTimeout, match=r"QUEUE_TIMEOUT_SECONDS=1\.5"):
            await answer(backend, request("late"))
        assert queued(queue_workers) == []
        assert await hog == "done"
    assert [r["messages"][-1]["content"] for r in queue_workers.fake.requests() if r["messages"]] == ["hog"]


async def test_round_past_round_timeout_fails_and_ollama_stops_generating(queue_workers: Workers) -> None:
    queue_workers.fake.script({"default": {"content": "too late", "first_token_delay": 10}})
    queue_workers.start(ROUND_TIMEOUT_SECONDS="1")
    async with open_backend(queue_workers) as backend:
        started = time.monotonic()
        with pytest.raises(UpstreamTimeout, match="ROUND_TIMEOUT_SECONDS=1"):
            await answer(backend, request("slow"))
        assert time.monotonic() - started < 5
    await asyncio.to_thread(wait_until, lambda: queue_workers.fake.stats()["cancelled"] == 1, 5.0)


async def test_gpu_lock_is_refreshed_through_a_round_longer_than_its_ttl(queue_workers: Workers) -> None:
    # 7 s of streaming against a 5 s lock TTL, with a second worker polling for the same GPU meanwhile.
    queue_workers.fake.script(
        {
            "rules": [
                {"when": {"user_contains": "long"}, "reply": {"content": " ".join(["t"] * 36), "token_delay": 0.2}}
            ],
            "default": {"content": "short"},
        }
    )
    queue_workers.start()
    queue_workers.start()
    async with open_backend(queue_workers) as backend:
        long = asyncio.create_task(answer(backend, request("long")))
        await asyncio.to_thread(wait_until, lambda: queue_workers.fake.stats()["active"] == 1, 10.0)
        short = asyncio.create_task(answer(backend, request("short")))
        assert list(await asyncio.wait_for(asyncio.gather(long, short), 30)) == [" ".join(["t"] * 36), "short"]
    assert queue_workers.fake.stats()["peak"] == 1
