"""Pure parts of the API side of the GPU queue: Retry-After estimation and capacity, queue choice."""

from __future__ import annotations

from typing import Any

import pytest

from agent.backends.base import RoundRequest
from agent.queue import keys
from agent.queue.client import estimate_retry_after, queue_for
from agent.queue.registry import capacity


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
