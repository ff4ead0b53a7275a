"""How full the GPU queue is: the QUEUE_DEPTH gauge, the 429 of a refused round with its Retry-After, the 503 of a wait.

The gauge is set from each admission's reply (the depth Redis saw at that moment) and re-read from Redis a
little after rounds enter or leave the queue. Concurrent admissions may resume out of order, so an admission's
depth can be stale: the sample that follows it corrects that, and a sample never overwrites a fresher admission.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from agent.errors import QueueFull, QueueTimeout, TaskRefused, UserShareFull
from agent.metrics import QUEUE_DEPTH
from agent.queue import keys

SAMPLE_AFTER = 1.0  # seconds from a round's start to the re-read of QUEUE_DEPTH it triggers
DEFAULT_ROUND_S, MAX_RETRY_AFTER = 10.0, 120


def estimate_retry_after(
    durations: Sequence[float], depth: int, max_depth: int, capacity: int, fallback: float = DEFAULT_ROUND_S
) -> int:
    """Seconds until the queue has room: the mean recent round time per round over the limit, divided by the
    rounds the live backends run at once (agent.queue.registry.capacity)."""
    mean = sum(durations) / len(durations) if durations else fallback
    over = max(1, depth - max_depth + 1)
    return max(1, min(MAX_RETRY_AFTER, math.ceil(mean * over / max(1, capacity))))


def refusal(task: bool, depth: int, max_depth: int, wait: int) -> QueueFull:
    """The 429 of a round the queue did not admit, saying which limit and when to come back."""
    if task:
        return TaskRefused(
            "The GPU is busy with users' questions, so this background task (a title, tags or follow-up "
            f"suggestions) was not queued. Try again in about {wait} s.",
            retry_after=wait,
        )
    return QueueFull(
        f"The GPU queue is full: {depth} questions are waiting for the model (MAX_QUEUE_DEPTH={max_depth}). "
        f"This is not your rate limit; try again in about {wait} s.",
        retry_after=wait,
    )


def share_refusal(per_user: int, wait: int) -> UserShareFull:
    """The 429 of a new question from a caller who already has their share of the GPU queue."""
    return UserShareFull(
        f"You already have {per_user} questions waiting for or running on the model (MAX_ROUNDS_PER_USER={per_user}), "
        f"so others get their turn. Try again in about {wait} s, when one of yours has finished.",
        retry_after=wait,
    )


def queue_timeout(waited: float, limit: float) -> QueueTimeout:
    """The 503 of a round that waited for the GPU past QUEUE_TIMEOUT_SECONDS (in the API or on the worker)."""
    return QueueTimeout(
        f"The round waited {waited:.0f} s for the GPU worker, past QUEUE_TIMEOUT_SECONDS={limit:g}: the GPU is busy, "
        "try again later"
    )


class DepthGauge:
    """QUEUE_DEPTH: set by admissions, re-read by one background sample at a time (`spawn` runs it)."""

    def __init__(self, redis: aioredis.Redis, spawn: Callable[[Coroutine[Any, Any, None]], asyncio.Task[None]]) -> None:
        self.redis, self.spawn = redis, spawn
        self._sample: asyncio.Task[None] | None = None
        self._admissions = 0  # times an admission's reply set QUEUE_DEPTH: a sample read before is stale

    def set(self, depth: int) -> None:
        """An admission's reply: the latest depth Redis saw, possibly overtaken already (a sample follows)."""
        QUEUE_DEPTH.set(depth)
        self._admissions += 1
        self.sample_soon()

    def sample_soon(self) -> None:
        """A round entered or left the queue: re-read the depth a little later, once for all the rounds that move
        until then, instead of one more Redis pipeline beside every round while it streams its first tokens."""
        if self._sample is None or self._sample.done():
            self._sample = self.spawn(self.sample())

    async def sample(self) -> None:
        while True:  # until a read lands with no admission beside it (one read a second at most)
            await asyncio.sleep(SAMPLE_AFTER)
            admissions = self._admissions
            with contextlib.suppress(RedisError):
                pipe = self.redis.pipeline(transaction=False)
                for key in keys.RQ_QUEUE_KEYS:
                    pipe.llen(key)
                depth = sum(await pipe.execute())
                if self._admissions == admissions:
                    QUEUE_DEPTH.set(depth)
                    return
