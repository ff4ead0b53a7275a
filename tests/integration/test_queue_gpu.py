"""The GPU queue with real Redis, real agent-worker processes and the scripted Ollama: ordering and limits."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import cast

import httpx
import pytest
from prometheus_client import REGISTRY

from agent.backends.base import RoundDone, RoundEvent, TextDelta
from agent.errors import QueueFull
from agent.queue.keys import ROUND_TIMES, rq_job_key
from tests.integration import queue_fixtures
from tests.integration.queue_fixtures import Workers, answer, open_backend, queued, request
from tests.support.procs import free_port, wait_until

pytestmark = pytest.mark.integration
queue_redis, queue_fake, queue_workers = (
    queue_fixtures.queue_redis,
    queue_fixtures.queue_fake,
    queue_fixtures.queue_workers,
)


async def wait_queued(group: Workers, count: int) -> None:
    """Wait (without blocking the loop) until `count` jobs sit in the queues."""
    await asyncio.to_thread(wait_until, lambda: len(queued(group)) == count, 10.0, 0.01, f"{count} queued")


async def test_sixteen_concurrent_rounds_run_one_generation_at_a_time(queue_workers: Workers) -> None:
    queue_fake = queue_workers.fake
    queue_fake.script({"default": {"content": "one two three four"}, "token_delay": 0.01})
    queue_workers.start()
    waits_before = REGISTRY.get_sample_value("agent_queue_wait_seconds_count") or 0.0
    async with open_backend(queue_workers) as backend:
        texts = await asyncio.gather(*(answer(backend, request(f"q{i}")) for i in range(16)))
    assert texts == ["one two three four"] * 16
    assert REGISTRY.get_sample_value("agent_queue_wait_seconds_count") == waits_before + 16
    stats = queue_fake.stats()
    assert stats["generations"] == 16
    assert stats["peak"] == 1


def own_answers(group: Workers, clients: int, token_delay: float) -> None:
    """Script the model so that "client {i}." is answered "answer for {i}": a mixed-up round shows."""
    rules = [
        {"when": {"user_contains": f"client {i}."}, "reply": {"content": f"answer for {i}"}} for i in range(clients)
    ]
    group.fake.script({"rules": rules, "default": {"content": "nobody"}, "token_delay": token_delay})


async def test_rounds_queued_behind_each_other_on_one_worker_each_give_their_own_client_its_answer(
    queue_workers: Workers,
) -> None:
    own_answers(queue_workers, 12, 0.01)
    proc = queue_workers.start()
    async with open_backend(queue_workers) as backend:
        texts = await asyncio.gather(*(answer(backend, request(f"client {i}.")) for i in range(12)))
    assert texts == [f"answer for {i}" for i in range(12)]
    stats = queue_workers.fake.stats()
    assert (stats["peak"], stats["generations"], stats["cancelled"]) == (1, 12, 0)  # one at a time, none wasted
    started = [line for line in proc.output().splitlines() if "round_started" in line]
    assert len(started) == 12


async def test_a_worker_joining_mid_stream_takes_rounds_and_every_round_is_answered_exactly_once(
    queue_workers: Workers,
) -> None:
    own_answers(queue_workers, 32, 0.05)
    first = queue_workers.start()
    async with open_backend(queue_workers) as backend:
        rounds = [asyncio.create_task(answer(backend, request(f"client {i}."))) for i in range(24)]
        await asyncio.to_thread(wait_until, lambda: queue_workers.fake.stats()["generations"] >= 3, 10.0, 0.01)
        second = await asyncio.to_thread(queue_workers.start, "gpu1")
        # more rounds once it is up: the first worker may have run all 24 while a loaded host started the second
        rounds += [asyncio.create_task(answer(backend, request(f"client {i}."))) for i in range(24, 32)]
        texts = await asyncio.gather(*rounds)
    ran = [proc.output().count("round_started") for proc in (first, second)]
    assert sum(ran) == 32 and min(ran) > 0  # both took rounds
    assert texts == [f"answer for {i}" for i in range(32)]
    completed = [r["messages"][-1]["content"] for r in queue_workers.fake.requests() if r["outcome"] == "completed"]
    assert sorted(completed) == sorted(f"client {i}." for i in range(32))  # none run twice, none lost


async def test_tokens_stream_as_the_gpu_makes_them_and_worker_exports_metrics(queue_workers: Workers) -> None:
    queue_fake = queue_workers.fake
    queue_fake.script({"default": {"content": "a b c d e f"}, "token_delay": 0.3})
    metrics_port = free_port()
    proc = queue_workers.start(WORKER_METRICS_PORT=str(metrics_port))
    async with open_backend(queue_workers) as backend:
        loop = asyncio.get_running_loop()
        arrivals: list[float] = []
        async for event in backend.stream_round(request("stream", request_id="rid-stream")):
            if isinstance(event, TextDelta):
                arrivals.append(loop.time())
            if isinstance(event, RoundDone):
                assert event.completion_tokens == 6
    assert len(arrivals) == 6
    assert arrivals[-1] - arrivals[0] > 1.0  # delivered one by one, not buffered to the end
    async with httpx.AsyncClient() as http:
        text = (await http.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5)).text
    assert 'agent_gpu_busy{gpu="gpu0"} 0.0' in text
    assert 'agent_model_up{gpu="gpu0"} 1.0' in text  # feeds the OllamaDown alert
    assert 'agent_ollama_up{gpu="gpu0"} 1.0' in text  # its old name, kept one release
    assert 'agent_model_present{gpu="gpu0"} 1.0' in text
    assert 'agent_round_duration_seconds_count{model="qwen3:4b",round="1"} 1.0' in text
    assert 'agent_llm_tokens_total{kind="completion",model="qwen3:4b"} 6.0' in text
    assert "agent_llm_time_to_first_token_seconds_count 1.0" in text
    assert '"request_id": "rid-stream"' in proc.output()  # one request_id from API to worker logs


async def test_two_workers_on_one_gpu_never_generate_at_once(queue_workers: Workers) -> None:
    queue_fake = queue_workers.fake
    queue_fake.script({"default": {"content": "x y z"}, "token_delay": 0.02})
    first, second = queue_workers.start(), queue_workers.start()
    async with open_backend(queue_workers) as backend:
        texts = await asyncio.gather(*(answer(backend, request(f"w{i}")) for i in range(12)))
    assert texts == ["x y z"] * 12
    assert queue_fake.stats()["peak"] == 1
    # Both workers really took rounds: the GPU lock, not luck, kept the generations apart.
    assert "round_finished" in first.output() and "round_finished" in second.output()


async def test_rounds_of_conversations_under_way_overtake_new_ones(queue_workers: Workers) -> None:
    queue_fake = queue_workers.fake
    queue_fake.script(
        {
            "rules": [{"when": {"user_contains": "hog"}, "reply": {"content": "done", "first_token_delay": 3.0}}],
            "default": {"content": "ok"},
        }
    )
    queue_workers.start()
    async with open_backend(queue_workers) as backend:
        hog = asyncio.create_task(answer(backend, request("hog")))
        await asyncio.to_thread(wait_until, lambda: queue_fake.stats()["active"] == 1, 10.0, 0.01, "hog running")
        tasks = []
        for name, round_no in (("new-a", 1), ("new-b", 1), ("later", 3)):
            tasks.append(asyncio.create_task(answer(backend, request(name, round_no))))
            await wait_queued(queue_workers, len(tasks))
        await asyncio.gather(hog, *tasks)
    order = [r["messages"][-1]["content"] for r in queue_fake.requests() if r["messages"]]
    assert order == ["hog", "later", "new-a", "new-b"]


async def test_full_queue_is_refused_with_retry_after_from_recent_round_times(queue_workers: Workers) -> None:
    queue_fake = queue_workers.fake
    queue_fake.script(
        {
            "rules": [{"when": {"user_contains": "hog"}, "reply": {"content": "done", "first_token_delay": 3.0}}],
            "default": {"content": "ok"},
        }
    )
    queue_workers.start()
    queue_workers.redis.client().lpush(ROUND_TIMES, *["7.0"] * 5)
    async with open_backend(queue_workers, max_queue_depth=2) as backend:
        hog = asyncio.create_task(answer(backend, request("hog")))
        await asyncio.to_thread(wait_until, lambda: queue_fake.stats()["active"] == 1, 10.0, 0.01, "hog running")
        waiting = [asyncio.create_task(answer(backend, request(f"wait{i}"))) for i in range(2)]
        await wait_queued(queue_workers, 2)
        rejected_before = REGISTRY.get_sample_value("agent_rejected_total", {"reason": "queue_full"}) or 0.0
        with pytest.raises(QueueFull) as refused:
            await answer(backend, request("one too many"))
        assert REGISTRY.get_sample_value("agent_rejected_total", {"reason": "queue_full"}) == rejected_before + 1
        assert REGISTRY.get_sample_value("agent_queue_depth") == 2
        assert refused.value.retry_after == 7
        assert "MAX_QUEUE_DEPTH=2" in refused.value.message
        # the hog's hash (RQ keeps a job's while it runs) and the two waiting ones; the refused job left nothing
        assert len(queue_workers.redis.client().keys(rq_job_key("*"))) == 3
        assert await asyncio.gather(hog, *waiting) == ["done", "ok", "ok"]


async def test_disconnect_removes_the_queued_job_and_stops_the_running_generation(queue_workers: Workers) -> None:
    queue_fake = queue_workers.fake
    queue_fake.script({"default": {"content": " ".join(["tok"] * 200)}, "token_delay": 0.05})
    queue_workers.start()
    async with open_backend(queue_workers) as backend:
        running = cast(AsyncGenerator[RoundEvent, None], backend.stream_round(request("running")))  # an async def
        first = await anext(running)
        while not isinstance(first, TextDelta):
            first = await anext(running)
        waiter = asyncio.create_task(answer(backend, request("queued")))
        await wait_queued(queue_workers, 1)
        job_id = queued(queue_workers)[0]
        waiter.cancel()  # the API's request task is cancelled when its client goes away
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert queued(queue_workers) == []
        assert not queue_workers.redis.client().exists(rq_job_key(job_id))
        await running.aclose()  # the streaming client goes away mid-answer
        await asyncio.to_thread(
            wait_until, lambda: queue_fake.stats()["cancelled"] == 1, 5.0, 0.02, "generation cancelled"
        )
        assert queue_fake.stats()["active"] == 0
        queue_fake.script({"default": {"content": "next"}})
        assert await answer(backend, request("after")) == "next"  # the GPU is free again at once
    assert [r["messages"][-1]["content"] for r in queue_fake.requests() if r["messages"]] == ["running", "after"]
