"""Pure parts of the API side of the GPU queue: Retry-After estimation and queue choice."""

from __future__ import annotations

import pytest

from agent.backends.base import RoundRequest
from agent.queue import keys
from agent.queue.client import estimate_retry_after, queue_for


def make(round_no: int) -> RoundRequest:
    return RoundRequest(model="m", messages=[], tools=None, options={}, round=round_no)


@pytest.mark.parametrize(
    ("durations", "depth", "max_depth", "workers", "expected"),
    [
        ([4.0, 6.0], 32, 32, 1, 5),  # one slot must free up: one mean round time
        ([4.0, 6.0], 34, 32, 1, 15),  # three rounds over the limit (several API replicas raced)
        ([4.0, 6.0], 32, 32, 2, 3),  # two GPUs drain twice as fast (ceil of 2.5)
        ([], 32, 32, 1, 10),  # no history yet: the fallback round time
        ([0.01] * 5, 32, 32, 1, 1),  # never below one second
        ([500.0], 32, 32, 1, 120),  # never above two minutes
        ([10.0], 5, 32, 0, 10),  # no live worker counted: treated as one
    ],
)
def test_retry_after_comes_from_recent_round_times(
    durations: list[float], depth: int, max_depth: int, workers: int, expected: int
) -> None:
    assert estimate_retry_after(durations, depth, max_depth, workers) == expected


def test_rounds_of_conversations_under_way_use_the_queue_read_first() -> None:
    assert queue_for(make(1)) == keys.QUEUE_NEW
    assert queue_for(make(2)) == keys.QUEUE_CONTINUING
    assert queue_for(make(5)) == keys.QUEUE_CONTINUING
    assert queue_for(make(3), continuing_first=False) == keys.QUEUE_NEW
