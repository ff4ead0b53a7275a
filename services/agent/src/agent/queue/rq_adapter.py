"""The only module that imports RQ: the admitting queue, the job push, the GPU worker class.

RQ gives the queue its job hashes, its worker loop and its job timeouts; the agent adds two things RQ has
no hook for, and both lean on RQ internals that tests/integration/test_rq_adapter.py pins:

- admission: `Queue.enqueue_job(pipeline=...)` queues the job's save and, as its LAST pipelined command,
  `push_job_id()`. AdmittingQueue overrides that push with a Lua script that pushes only below
  MAX_QUEUE_DEPTH, so saving and admitting a job is one MULTI/EXEC and the script's reply is the last
  result of the pipeline.
- heartbeat and state: GpuWorker skips RQ's unpipelined heartbeats that come closer than 5 s apart and its
  unpipelined worker-state writes.
- slots: GpuWorker dequeues only while this worker has a free round slot (agent.queue.slots); the job
  function starts the round and returns, so up to WORKER_SLOTS rounds run at once in one process.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from redis import Redis
from rq import Queue, SimpleWorker
from rq.job import Job
from rq.serializers import JSONSerializer
from rq.utils import now

from agent.queue import keys
from agent.queue.slots import Slots

JOB_FUNCTION = "agent.queue.jobs.run_round"  # imported by the worker from this dotted name
RESULT_TTL, FAILURE_TTL = 60, 3600

# Push only while both queues together hold fewer than ARGV[2] jobs (-1: no limit). Returns the depth
# after the push, or -(depth + 1) when refused. Atomic, so API replicas racing at the limit cannot overshoot.
_ADMIT = """
local depth = redis.call('llen', KEYS[1]) + redis.call('llen', KEYS[2])
local limit = tonumber(ARGV[2])
if limit >= 0 and depth >= limit then return -depth - 1 end
if ARGV[3] == '1' then redis.call('lpush', KEYS[3], ARGV[1]) else redis.call('rpush', KEYS[3], ARGV[1]) end
return depth + 1
"""


class AdmittingQueue(Queue):
    """RQ queue whose push is the admission check, so saving and admitting a job is one MULTI/EXEC."""

    def __init__(self, name: str, limit: int, **kwargs: Any) -> None:
        super().__init__(name, **kwargs)
        self.limit = limit

    def push_job_id(self, job_id: str, pipeline: Any = None, at_front: bool = False) -> None:
        # RQ 2.x enqueue_job() saves the job, then calls push_job_id() as its last pipelined command.
        target = pipeline if pipeline is not None else self.connection
        target.eval(_ADMIT, 3, *keys.RQ_USER_QUEUE_KEYS, self.key, job_id, self.limit, "1" if at_front else "0")


def admitting_queues(connection: Redis, limit: int) -> dict[tuple[str, bool], AdmittingQueue]:
    """(queue name, limited?) → queue; the unlimited ones take retried rounds, which were admitted once.
    A client task round is admitted only while no user round waits (limit 1 on the user queues' depth)."""
    return {
        (name, limited): AdmittingQueue(
            name,
            (1 if name == keys.QUEUE_TASKS else limit) if limited else -1,
            connection=connection,
            serializer=JSONSerializer,
        )
        for name in keys.QUEUE_ORDER
        for limited in (True, False)
    }


@dataclass(frozen=True)
class JobSpec:
    """One round as an RQ job: plain JSON arguments and the lifetimes RQ enforces."""

    job_id: str
    args: tuple[Any, ...]
    timeout: int  # RQ's job timeout (SIGALRM in the worker)
    ttl: int  # how long the job may wait in the queue
    description: str  # shows in RQ's logs: never the prompt


def push(queue: AdmittingQueue, spec: JobSpec, at_front: bool) -> tuple[bool, int]:
    """Save and admit the job in one MULTI/EXEC: (admitted?, queue depth). Sync: RQ's client is sync."""
    connection = queue.connection
    job = queue.create_job(
        JOB_FUNCTION,
        args=spec.args,
        job_id=spec.job_id,
        timeout=spec.timeout,
        result_ttl=RESULT_TTL,
        failure_ttl=FAILURE_TTL,
        ttl=spec.ttl,
        description=spec.description,
    )
    with connection.pipeline() as pipe:
        queue.enqueue_job(job, pipeline=pipe, at_front=at_front)
        depth = int(pipe.execute()[-1])  # the admitting push is the last command RQ queued
    if depth >= 0:
        return True, depth
    connection.delete(job.key)  # refused: the saved hash would only wait for its TTL
    return False, -depth - 1


class GpuWorker(SimpleWorker):
    """SimpleWorker that takes a round slot before each dequeue and reconnects to a restarted Redis within ~2 s
    instead of backing off to 60 s."""

    exponential_backoff_factor = 1.5
    max_connection_wait_time = 2.0
    log_job_description = False  # descriptions never hold prompts, but keep RQ's lines short anyway
    slots: Slots

    def dequeue_job_and_maintain_ttl(self, timeout: int | None, max_idle_time: int | None = None) -> Any:
        # A job leaves the queues only when it can start here at once: a busy worker never holds a round
        # another worker could run, and the queues' order (continuing, new, tasks) stays the priority.
        while not self.slots.take(timeout=1.0):  # a SIGTERM while waiting stops the worker (StopRequested)
            self.heartbeat()
        result = super().dequeue_job_and_maintain_ttl(timeout, max_idle_time)
        if result is None:
            self.slots.settle()
        return result

    def execute_job(self, job: Job, queue: Queue) -> None:
        try:
            super().execute_job(job, queue)
        finally:
            self.slots.settle()  # the job failed before its round claimed the slot

    def set_state(self, state: str, pipeline: Any = None) -> None:
        # RQ writes idle/busy to its worker hash with one unpipelined round trip before each dequeue and after
        # each job: right between one generation and the next. Rounds outlive their jobs here, so that state
        # means little; it is kept locally (warm shutdown reads it) and written only inside RQ's pipelines.
        if pipeline is None:
            self._state = state
            return
        super().set_state(state, pipeline)

    def heartbeat(self, timeout: int | None = None, pipeline: Any = None) -> None:
        # RQ sends this as two unpipelined commands up to three times per job, between one generation and
        # the next; its key lives worker_ttl + 60 = 480 s, so refreshing it every few seconds is plenty.
        last = self.last_heartbeat
        if pipeline is None and timeout is None and last is not None and (now() - last).total_seconds() < 5:
            return
        super().heartbeat(timeout, pipeline)


def gpu_worker(connection: Redis, name: str, slots: Slots) -> GpuWorker:
    """A worker reading the continuing-rounds queue, then the new-rounds queue, then the client tasks'."""
    queues = [Queue(q, connection=connection, serializer=JSONSerializer) for q in keys.QUEUE_ORDER]
    worker = GpuWorker(queues, connection=connection, serializer=JSONSerializer, name=name)
    worker.slots = slots
    return worker
