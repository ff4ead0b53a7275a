"""Rules the API side of the queue (agent.queue.client) applies to a round: its queue, how its worker is lost,
a cancellation redis-py swallowed."""

from __future__ import annotations

import asyncio

from agent.backends.base import RoundRequest
from agent.queue import keys


def queue_for(request: RoundRequest, continuing_first: bool = True) -> str:
    """Rounds of conversations under way (round > 1) go on the queue every worker reads first;
    client task rounds on the one read last."""
    if request.priority == "task":
        return keys.QUEUE_TASKS
    return keys.QUEUE_CONTINUING if continuing_first and request.round > 1 else keys.QUEUE_NEW


class WorkerLost(Exception):
    """The worker holding a round stopped answering (killed, crashed, or cut off from Redis)."""


def raise_if_cancelled() -> None:
    """Re-raise a cancellation the Redis client swallowed. redis-py's asyncio client sometimes returns normally
    from a blocking XREAD that was cancelled (measured with redis-py 8.1: 5 of 300 cancels): the round of a client
    gone while queued then ran anyway. The task still counts the request (Task.cancelling), so ask it."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError
