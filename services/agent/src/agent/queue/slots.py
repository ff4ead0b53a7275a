"""A worker's round slots (WORKER_SLOTS): the RQ thread takes one before it dequeues, the round gives it back.

One agent-worker runs up to WORKER_SLOTS rounds at once on its event loop. The RQ thread (agent.queue.rq_adapter
.GpuWorker) waits here for a free slot before it reads a job, so a job leaves the Redis queues only when this
worker can start it at once: the queues' priorities still decide which round runs next, and a busy worker
never hoards a round another worker could run. The job function (agent.queue.jobs.run_round) claims the
slot the RQ thread took and returns; the round releases it from the event loop when it ends.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class Slots:
    """A counting semaphore plus the one slot the RQ thread holds between taking it and the job claiming it."""

    def __init__(self, count: int) -> None:
        if count < 1:
            raise ValueError(f"a worker needs at least one slot, got {count}")
        self.count = count
        self._free = threading.Semaphore(count)
        self._taken = False  # touched by the RQ thread only

    def take(self, timeout: float) -> bool:
        """RQ thread, before a dequeue: wait up to `timeout` s for a free slot."""
        self._taken = self._free.acquire(timeout=timeout)
        return self._taken

    def claim(self) -> Callable[[], None]:
        """RQ thread, in the job function: the taken slot now belongs to the round; call the result to free it."""
        if not self._taken:
            raise RuntimeError("run_round runs only on a slot the worker took before dequeuing")
        self._taken = False
        return self._free.release  # thread-safe: the round's event loop calls it

    def settle(self) -> None:
        """RQ thread, after a dequeue or a job: give back a slot no round claimed (empty queue, failed job)."""
        if self._taken:
            self._taken = False
            self._free.release()
