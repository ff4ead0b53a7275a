"""Slots per backend (WORKER_SLOTS): a backend runs up to its slots' rounds at once and never more."""

from __future__ import annotations

import asyncio

import pytest

from agent.queue.keys import gpu_slot_keys
from tests.fakes.control import fake_ollama_process
from tests.integration import queue_fixtures
from tests.integration.queue_fixtures import Workers, answer, open_backend, request

pytestmark = pytest.mark.integration
queue_redis, queue_fake, queue_workers = (
    queue_fixtures.queue_redis,
    queue_fixtures.queue_fake,
    queue_fixtures.queue_workers,
)
SCRIPT = {"default": {"content": "a b c d e f g h"}, "token_delay": 0.05}  # ~0.35 s per round


async def test_two_backends_of_one_and_three_slots_under_sixteen_clients(queue_workers: Workers) -> None:
    one_slot = queue_workers.fake
    one_slot.script(SCRIPT)
    with fake_ollama_process() as three_slots:
        three_slots.script(SCRIPT)
        queue_workers.start("gpu0", WORKER_SLOTS="1")
        queue_workers.start("gpu1", OLLAMA_URL=three_slots.url, WORKER_SLOTS="3")
        async with open_backend(queue_workers) as backend:
            texts = await asyncio.gather(*(answer(backend, request(f"c{i}")) for i in range(16)))
        small, big = one_slot.stats(), three_slots.stats()
    assert texts == ["a b c d e f g h"] * 16
    assert small["generations"] + big["generations"] == 16
    assert small["generations"] >= 1  # both backends served rounds
    assert big["generations"] > small["generations"]  # three slots serve more of the same rounds
    assert small["peak"] == 1
    assert big["peak"] == 3  # filled to its slots, never past them


async def test_workers_sharing_a_gpu_id_share_its_slots(queue_workers: Workers) -> None:
    queue_workers.fake.script(SCRIPT)
    first = queue_workers.start("gpu0", WORKER_SLOTS="2")
    second = queue_workers.start("gpu0", WORKER_SLOTS="2")
    async with open_backend(queue_workers) as backend:
        texts = await asyncio.gather(*(answer(backend, request(f"s{i}")) for i in range(10)))
    assert texts == ["a b c d e f g h"] * 10
    assert queue_workers.fake.stats()["peak"] == 2  # four rounds could run in two workers; the GPU has two slots
    assert "round_finished" in first.output() and "round_finished" in second.output()
    assert queue_workers.redis.client().exists(*gpu_slot_keys("main", "gpu0", 2)) == 0  # every slot given back
