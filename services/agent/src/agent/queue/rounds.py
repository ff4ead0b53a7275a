"""A round as the API side of the queue follows it (agent.queue.client): its state, its queue, how it fails.

A round is enqueued on the continuing-rounds queue (round > 1), the new-rounds queue or the client tasks' queue,
and moves queued → accepted (a worker took it) → running (it holds a GPU slot) as its events arrive.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

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


@dataclass
class Round:
    """One attempt at a round, as the API follows it (a retry is a new Round with a new job id)."""

    request: RoundRequest
    job_id: str
    enqueued: float = 0.0  # monotonic
    phase: str = "queued"  # queued → accepted (worker has it) → running (GPU lock held)
    queue_wait: float | None = None
    forwarded: bool = False  # an event reached the caller: a retry would repeat it
    finished: bool = False
    vanished: float | None = None
    no_worker_since: float | None = None


def raise_if_cancelled() -> None:
    """Re-raise a cancellation the Redis client swallowed. redis-py's asyncio client sometimes returns normally
    from a blocking XREAD that was cancelled (measured with redis-py 8.1: 5 of 300 cancels): the round of a client
    gone while queued then ran anyway. The task still counts the request (Task.cancelling), so ask it."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError
