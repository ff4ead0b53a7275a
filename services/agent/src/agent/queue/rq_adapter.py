"""The only module that imports RQ: the job's function and lifetimes, reading a job back, the worker class.

RQ gives the queue its job hashes and the worker its registration and signal handling. The API writes RQ's job
hash itself, with its admission check, in one script (agent.queue.admit; tests/integration/test_rq_adapter.py
pins that hash against the installed RQ's). The worker leans on RQ internals the same test file pins:

- the worker: GpuWorker is RQ's worker loop without its dequeue; the dispatcher (agent.queue.dispatch) pops
  and runs the rounds, reading the job hashes through `job_args`. It skips RQ's unpipelined heartbeats that
  come closer than 5 s apart and its unpipelined worker-state writes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

import redis
from redis import Redis
from rq import Queue, SimpleWorker
from rq.job import Job
from rq.serializers import JSONSerializer
from rq.utils import now
from rq.worker import WorkerStatus

from agent.queue import keys

JOB_FUNCTION = "agent.queue.jobs.run_round"  # imported by the worker from this dotted name
RESULT_TTL, FAILURE_TTL = 60, 3600


def job_args(job_id: str, fields: dict[bytes, bytes]) -> tuple[Any, ...]:
    """The arguments of a round's job from its saved hash (read by the worker's claim, agent.queue.dispatch)."""
    job = Job(job_id, connection=_NO_IO, serializer=JSONSerializer)
    job.restore(fields)
    return tuple(job.args)


_NO_IO = Redis()  # Job() wants a connection; restoring a job from its fields never uses it (redis-py connects lazily)


class GpuWorker(SimpleWorker):
    """The main thread of agent-worker: RQ's worker registration, heartbeat and SIGTERM handling around the
    dispatcher, which claims and runs the rounds on the event loop (agent.queue.dispatch). Reconnects to a
    restarted Redis within ~2 s instead of backing off to 60 s."""

    exponential_backoff_factor = 1.5
    max_connection_wait_time = 2.0
    log_job_description = False
    finished: threading.Event  # set when the dispatcher stops (burst: queues empty; or it failed)
    on_stop: Callable[[], None]  # a warm shutdown: the dispatcher claims nothing more

    def dequeue_job_and_maintain_ttl(self, timeout: int | None, max_idle_time: int | None = None) -> Any:
        # Never hands RQ a job: rounds are claimed and run on the event loop. Returning None ends RQ's work loop,
        # which happens once the dispatcher has stopped; a SIGTERM while waiting here raises StopRequested.
        self.set_state(WorkerStatus.IDLE)
        wait = 1.0
        while not self.finished.wait(timeout=wait):
            try:
                self.heartbeat()
                wait = 1.0
            except redis.exceptions.ConnectionError as exc:  # RQ's own loop would quit on it; Redis is restarting
                self.log.warning("Worker %s: Redis unreachable (%s), retrying", self.name, exc)
                wait = self.max_connection_wait_time
        return None

    def request_stop(self, signum: int, frame: FrameType | None) -> None:
        self.on_stop()
        super().request_stop(signum, frame)  # type: ignore[no-untyped-call]

    def set_state(self, state: str, pipeline: Any = None) -> None:
        # RQ writes idle/busy to its worker hash with an unpipelined round trip. Rounds never run as RQ jobs
        # here, so that state means little; it is kept locally (warm shutdown reads it), written only in pipelines.
        if pipeline is None:
            self._state = state
            return
        super().set_state(state, pipeline)

    def heartbeat(self, timeout: int | None = None, pipeline: Any = None) -> None:
        # Its key lives worker_ttl + 60 = 480 s, so refreshing it every few seconds is plenty.
        last = self.last_heartbeat
        if pipeline is None and timeout is None and last is not None and (now() - last).total_seconds() < 5:
            return
        super().heartbeat(timeout, pipeline)


def gpu_worker(connection: Redis, name: str, finished: threading.Event, on_stop: Callable[[], None]) -> GpuWorker:
    """RQ's record of an agent-worker, listening (for `rq info`) on the queues its dispatcher reads."""
    queues = [Queue(q, connection=connection, serializer=JSONSerializer) for q in keys.QUEUE_ORDER]
    worker = GpuWorker(queues, connection=connection, serializer=JSONSerializer, name=name)
    worker.finished, worker.on_stop = finished, on_stop
    return worker
