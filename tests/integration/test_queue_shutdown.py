"""Stopping an agent-worker whose rounds outlive their RQ jobs: SIGTERM lets them finish, a second aborts them."""

from __future__ import annotations

import asyncio
import signal
import time

import pytest

from agent.backends.base import TextDelta
from agent.errors import DependencyDown
from tests.integration import queue_fixtures
from tests.integration.queue_fixtures import Workers, open_backend, request
from tests.support.procs import wait_until

pytestmark = pytest.mark.integration
queue_redis, queue_fake, queue_workers = (
    queue_fixtures.queue_redis,
    queue_fixtures.queue_fake,
    queue_fixtures.queue_workers,
)


async def test_sigterm_mid_round_lets_the_round_finish_then_the_worker_exits(queue_workers: Workers) -> None:
    queue_workers.fake.script({"default": {"content": "one two three four five six"}, "token_delay": 0.2})
    worker = queue_workers.start()
    async with open_backend(queue_workers) as backend:
        texts: list[str] = []
        async for event in backend.stream_round(request("finish me")):
            if isinstance(event, TextDelta):
                if not texts:
                    worker.popen.send_signal(signal.SIGTERM)  # warm shutdown: the RQ job already returned
                texts.append(event.text)
    assert "".join(texts) == "one two three four five six"
    assert await asyncio.to_thread(worker.popen.wait, 10) == 0
    assert queue_workers.fake.stats()["cancelled"] == 0


async def test_a_second_sigterm_aborts_the_round_with_a_clear_error(queue_workers: Workers) -> None:
    queue_workers.fake.script({"default": {"content": " ".join(["tok"] * 100)}, "token_delay": 0.1})
    worker = queue_workers.start()
    async with open_backend(queue_workers) as backend:
        stream = backend.stream_round(request("stop me"))
        event = await anext(stream)
        while not isinstance(event, TextDelta):
            event = await anext(stream)
        worker.popen.send_signal(signal.SIGTERM)
        with pytest.raises(DependencyDown, match="agent-worker was stopped mid-round"):
            last = time.monotonic()
            async for _ in stream:
                if time.monotonic() - last > 0.3:  # RQ ignores a second signal within 1 s of the first
                    worker.popen.send_signal(signal.SIGTERM)
                    last = time.monotonic()
    await asyncio.to_thread(worker.popen.wait, 10)
    # The model's stream was closed, not left generating after the worker was gone.
    await asyncio.to_thread(wait_until, lambda: queue_workers.fake.stats()["cancelled"] == 1, 5.0)
