"""Pure parts of the API side of the GPU queue: Retry-After estimation and capacity, queue choice."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest
from prometheus_client import REGISTRY

from agent.backends.base import RoundEvent, RoundRequest
from agent.queue import client, depth, keys
from agent.queue.client import QueueBackend, _Round, queue_for
from agent.queue.depth import estimate_retry_after
from agent.queue.registry import capacity
from agent.settings import Settings


def make(round_no: int) -> RoundRequest:
    return RoundRequest(model="m", messages=[], tools=None, options={}, round=round_no)


@pytest.mark.parametrize(
    ("durations", "depth", "max_depth", "slots", "expected"),
    [
        ([4.0, 6.0], 32, 32, 1, 5),  # one slot must free up: one mean round time
        ([4.0, 6.0], 34, 32, 1, 15),  # three rounds over the limit (several API replicas raced)
        ([4.0, 6.0], 32, 32, 2, 3),  # two GPUs drain twice as fast (ceil of 2.5)
        ([], 32, 32, 1, 10),  # no history yet: the fallback round time
        ([0.01] * 5, 32, 32, 1, 1),  # never below one second
        ([500.0], 32, 32, 1, 120),  # never above two minutes
        ([10.0], 5, 32, 0, 10),  # no live worker counted: treated as one
        ([4.0, 6.0], 32, 32, 4, 2),  # four slots in all (one GPU of 3 + one of 1)
    ],
)
def test_retry_after_comes_from_recent_round_times(
    durations: list[float], depth: int, max_depth: int, slots: int, expected: int
) -> None:
    assert estimate_retry_after(durations, depth, max_depth, slots) == expected


def test_capacity_is_the_slots_of_each_live_gpu_once() -> None:
    workers: list[dict[str, Any]] = [
        {"gpu_id": "gpu0", "slots": 1},
        {"gpu_id": "gpu1", "slots": 3},
        {"gpu_id": "gpu1", "slots": 3},  # a second worker on the same GPU shares its slots
        {"gpu_id": "host2-gpu0"},  # a worker of the previous release publishes no slots: one
    ]
    assert capacity(workers) == 5
    assert capacity([]) == 0


def test_rounds_of_conversations_under_way_use_the_queue_read_first() -> None:
    assert queue_for(make(1)) == keys.QUEUE_NEW
    assert queue_for(make(2)) == keys.QUEUE_CONTINUING
    assert queue_for(make(5)) == keys.QUEUE_CONTINUING
    assert queue_for(make(3), continuing_first=False) == keys.QUEUE_NEW


async def test_a_cancellation_the_redis_client_swallows_still_ends_the_follow(monkeypatch: pytest.MonkeyPatch) -> None:
    """redis-py sometimes returns from a cancelled blocking XREAD instead of raising: the round must still end."""
    backend = QueueBackend(Settings(redis_url="redis://127.0.0.1:1/0", model_backend="queue"))
    reading = asyncio.Event()

    class SwallowingReader:
        host = None

        def __init__(self, *args: Any) -> None:
            pass

        async def read(self, count: int, block_ms: int) -> list[dict[str, Any]]:
            if reading.is_set():  # only the first cancellation is lost; later reads behave
                await asyncio.sleep(10)
            reading.set()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.sleep(10)
            return []

    async def no_check(*args: Any) -> None:
        return None

    monkeypatch.setattr(client, "RoundReader", SwallowingReader)
    backend._check = no_check  # type: ignore[method-assign,assignment]

    async def first_event() -> RoundEvent:
        return await anext(backend._follow(_Round(make(1), "job")))

    follow = asyncio.create_task(first_event())
    await reading.wait()
    follow.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(follow, 2)


async def test_rounds_starting_together_trigger_one_depth_sample() -> None:
    """Each start used to add a Redis pipeline beside the round's first tokens; one sample serves them all."""
    backend = QueueBackend(Settings(redis_url="redis://127.0.0.1:1/0", model_backend="queue"))
    for job in ("a", "b", "c"):
        backend._handle(_Round(make(1), job), {"kind": "started"}, 0.0)
    assert len(backend._background) == 1
    await backend.aclose()


@pytest.mark.parametrize(("admitted_meanwhile", "expected"), [(False, 1.0), (True, 2.0)])
async def test_a_depth_sample_never_overwrites_a_fresher_admission(
    monkeypatch: pytest.MonkeyPatch, admitted_meanwhile: bool, expected: float
) -> None:
    """The sample runs a while after a round starts; a round admitted while it reads Redis knows better than that
    read, and the sample reads again: Redis's depth (1, then 2 once the round is in) lands, never the stale read."""
    backend = QueueBackend(Settings(redis_url="redis://127.0.0.1:1/0", model_backend="queue"))
    monkeypatch.setattr(depth, "SAMPLE_AFTER", 0.0)
    reading, release = asyncio.Event(), asyncio.Event()
    reads = iter([[1, 0, 0], [2, 0, 0]])

    class SlowPipeline:
        def llen(self, key: str) -> None:
            return None

        async def execute(self) -> list[int]:
            reading.set()
            await release.wait()
            return next(reads)

    monkeypatch.setattr(backend.redis, "pipeline", lambda transaction=True: SlowPipeline())
    backend.depth.set(5)
    sample = backend.depth._sample
    assert sample is not None
    await reading.wait()
    if admitted_meanwhile:
        backend.depth.set(3)  # the admission's own reply; the sample that follows reads 2
    release.set()
    await sample
    assert REGISTRY.get_sample_value("agent_queue_depth") == expected
    await backend.aclose()
