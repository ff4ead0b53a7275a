"""Client task rounds on the GPU queue (real Redis, agent-worker, scripted Ollama): below every user round,
refused while user rounds wait, given up after CLIENT_TASK_WAIT_SECONDS, preempted by a user round."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from typing import Any

import pytest
from prometheus_client import REGISTRY

from agent.backends.base import RoundRequest
from agent.errors import DependencyDown, QueueFull, QueueTimeout
from agent.queue import keys
from agent.queue.client import QueueBackend
from tests.integration import queue_fixtures
from tests.integration.queue_fixtures import Workers, answer, open_backend, request
from tests.support.procs import wait_until

pytestmark = pytest.mark.integration
queue_redis, queue_fake, queue_workers = (
    queue_fixtures.queue_redis,
    queue_fixtures.queue_fake,
    queue_fixtures.queue_workers,
)
SLOW = {"when": {"user_contains": "slow"}, "reply": {"content": "s " * 20, "token_delay": 0.5}}


def task(text: str = "### Task: title") -> RoundRequest:
    return replace(request(text), priority="task")


def chats(group: Workers) -> list[dict[str, Any]]:
    return [r for r in group.fake.requests() if r["messages"]]  # not the worker's warm-up load


async def active(group: Workers, count: int) -> None:
    await asyncio.to_thread(wait_until, lambda: group.fake.stats()["active"] == count, 10.0, 0.02, "generation")


async def generating(group: Workers, backend: QueueBackend, text: str) -> asyncio.Task[str]:
    """A user round, once the model generates it."""
    round_task = asyncio.create_task(answer(backend, request(text)))
    await active(group, 1)
    return round_task


async def test_a_user_round_preempts_a_running_task_round(queue_workers: Workers) -> None:
    queue_workers.fake.script({"rules": [SLOW], "default": {"content": "user answer"}})
    queue_workers.start()
    async with open_backend(queue_workers) as backend:
        running = asyncio.create_task(answer(backend, task("### Task: slow title")))
        await active(queue_workers, 1)
        started = time.monotonic()
        assert await answer(backend, request("question")) == "user answer"
        with pytest.raises(DependencyDown, match="preempted"):
            await running
        assert time.monotonic() - started < 4.0  # not the task's 10 s
    outcomes = [(r["messages"][-1]["content"], r["outcome"]) for r in chats(queue_workers)]
    assert outcomes == [("### Task: slow title", "cancelled"), ("question", "completed")]


async def test_the_queue_depth_gauge_counts_waiting_task_rounds_too(queue_workers: Workers) -> None:
    queue_workers.fake.script({"rules": [SLOW]})
    queue_workers.start()
    async with open_backend(queue_workers) as backend:
        first = await generating(queue_workers, backend, "slow one")
        tasks = [asyncio.create_task(answer(backend, task(f"### Task: title {i}"))) for i in range(2)]
        try:
            await asyncio.to_thread(wait_until, lambda: len(queue_fixtures.queued(queue_workers)) == 2, 10.0, 0.02)

            # two admissions may resume out of order (the gauge briefly 1); the sample that follows sets it right
            def gauge() -> float | None:
                return REGISTRY.get_sample_value("agent_queue_depth")

            await asyncio.to_thread(wait_until, lambda: gauge() == 2, 10.0, 0.05, "agent_queue_depth == 2")
        finally:
            for job in (first, *tasks):
                job.cancel()
            await asyncio.gather(first, *tasks, return_exceptions=True)


async def test_a_task_is_refused_at_once_while_user_rounds_wait(queue_workers: Workers) -> None:
    queue_workers.fake.script({"rules": [SLOW]})
    queue_workers.start()
    async with open_backend(queue_workers) as backend:
        first = await generating(queue_workers, backend, "slow one")
        second = asyncio.create_task(answer(backend, request("slow two")))
        await asyncio.to_thread(wait_until, lambda: len(queue_fixtures.queued(queue_workers)) == 1, 10.0, 0.02)
        started = time.monotonic()
        with pytest.raises(QueueFull):
            await answer(backend, task())
        assert time.monotonic() - started < 1.0
        for job in (first, second):
            job.cancel()
        await asyncio.gather(first, second, return_exceptions=True)
    assert all("Task" not in r["messages"][-1]["content"] for r in chats(queue_workers))


async def test_a_task_gives_up_after_its_wait_and_leaves_the_queue(queue_workers: Workers) -> None:
    queue_workers.fake.script({"rules": [SLOW]})
    queue_workers.start()
    async with open_backend(queue_workers, client_task_wait_seconds=1.0) as backend:
        user = asyncio.create_task(answer(backend, request("slow user")))
        await active(queue_workers, 1)
        started = time.monotonic()
        with pytest.raises(QueueTimeout):
            await answer(backend, task())
        assert 1.0 <= time.monotonic() - started < 4.0
        client = queue_workers.redis.client()
        await asyncio.to_thread(wait_until, lambda: client.llen(keys.rq_queue_key(keys.QUEUE_TASKS)) == 0, 5.0, 0.05)
        user.cancel()
        await asyncio.gather(user, return_exceptions=True)
    assert all("Task" not in r["messages"][-1]["content"] for r in chats(queue_workers))


async def test_user_rounds_queued_behind_a_task_still_go_first(queue_workers: Workers) -> None:
    """Both wait while the GPU is busy: the worker takes the user round first (the task is preempted)."""
    queue_workers.fake.script({"rules": [SLOW], "default": {"content": "ok", "token_delay": 0.05}})
    queue_workers.start()
    async with open_backend(queue_workers, client_task_wait_seconds=30.0) as backend:
        busy = asyncio.create_task(answer(backend, replace(request("slow busy"), options={"num_predict": 4})))
        await active(queue_workers, 1)
        queued_task = asyncio.create_task(answer(backend, task("### Task: tags")))
        await asyncio.sleep(0.3)
        user = asyncio.create_task(answer(backend, request("later question")))
        await asyncio.gather(busy, queued_task, user, return_exceptions=True)
    order = [r["messages"][-1]["content"] for r in chats(queue_workers)]
    assert "later question" in order  # a waiting task is preempted too: it never runs ahead of the user
    assert "### Task: tags" not in order or order.index("later question") < order.index("### Task: tags")
