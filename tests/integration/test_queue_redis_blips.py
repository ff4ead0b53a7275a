"""The GPU queue through a Redis restart (SIGKILL, back a second later, as a restart policy does; AOF on as shipped):
a round that had sent nothing yet is submitted again once Redis answers and is answered; a round that had already
streamed tokens to its caller is never repeated. Uses the shipped REDIS_RECONNECT_SECONDS."""

from __future__ import annotations

import asyncio
import threading

import pytest

from agent.backends.base import TextDelta
from agent.errors import DependencyDown
from tests.integration import queue_fixtures
from tests.integration.queue_fixtures import Workers, answer, open_backend, request
from tests.support.procs import wait_until

pytestmark = pytest.mark.integration
queue_redis, queue_fake, queue_workers = (
    queue_fixtures.queue_redis,
    queue_fixtures.queue_fake,
    queue_fixtures.queue_workers,
)
BACK_AFTER = 1.0  # s, as `restart: unless-stopped` brings a killed Redis back


def asked(group: Workers, text: str) -> int:
    return sum(1 for r in group.fake.requests() if r["messages"] and r["messages"][-1]["content"] == text)


async def test_a_round_asked_while_redis_restarts_is_answered(queue_workers: Workers) -> None:
    queue_workers.fake.script({"default": {"content": "answered"}})
    queue_workers.start()
    async with open_backend(queue_workers) as backend:
        assert await answer(backend, request("warm")) == "answered"
        queue_workers.redis.kill()
        back = threading.Timer(BACK_AFTER, queue_workers.redis.start)
        back.start()
        try:
            assert await asyncio.wait_for(answer(backend, request("during the restart")), 60) == "answered"
        finally:
            back.join()
    assert asked(queue_workers, "during the restart") == 1


async def test_a_round_that_streamed_tokens_is_not_repeated_after_a_redis_restart(queue_workers: Workers) -> None:
    queue_workers.fake.script({"default": {"content": " ".join(["tok"] * 200)}, "token_delay": 0.05})
    queue_workers.start()
    async with open_backend(queue_workers) as backend:
        stream = backend.stream_round(request("half said"))
        event = await anext(stream)
        while not isinstance(event, TextDelta):
            event = await anext(stream)
        queue_workers.redis.kill()
        back = threading.Timer(BACK_AFTER, queue_workers.redis.start)
        back.start()
        try:
            with pytest.raises(DependencyDown):
                async for _ in stream:
                    pass
        finally:
            back.join()
        await asyncio.to_thread(wait_until, lambda: queue_workers.fake.stats()["active"] == 0, 30.0)
    assert asked(queue_workers, "half said") == 1
