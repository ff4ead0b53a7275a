"""The only module that imports RQ: the admitting queue, the job push, the worker class of the slot processes.

RQ gives the queue its job hashes, and each of agent-worker's slot processes its dequeue (priority order), job
timeout, result TTL, failed-job registry, registration and signal handling. The agent adds one thing RQ has no
hook for, leaning on RQ internals that tests/integration/test_rq_adapter.py pins:

- admission: `Queue.enqueue_job(pipeline=...)` queues the job's save and, as its LAST pipelined command,
  `push_job_id()`. AdmittingQueue overrides that push with a Lua script that pushes only below
  MAX_QUEUE_DEPTH (and preempts or tracks client task rounds), so saving and admitting a job is one
  MULTI/EXEC and the script's reply is the last result of the transaction. RQ's client is sync, so `push`
  lets RQ write its commands into a sync pipeline that is never executed (its `command_stack`) and sends
  them on the API's asyncio client: no thread hop, no second connection, the same job hash.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis
from redis import Redis
from rq import Queue, SimpleWorker
from rq.serializers import JSONSerializer

from agent.queue import keys

JOB_FUNCTION = "agent.queue.jobs.run_round"  # imported by the worker from this dotted name
RESULT_TTL, FAILURE_TTL = 60, 3600
Command = tuple[tuple[Any, ...], dict[str, Any]]  # (args, options) as a redis-py pipeline stacks them

# Admit the job (ARGV[1]) to its queue (KEYS[3]) only while both user queues (KEYS[1], KEYS[2]) hold fewer than
# ARGV[2] jobs (-1: no limit); a refused job's hash (KEYS[5]) goes too. An admitted task round joins the task
# rounds under way (KEYS[4]); an admitted user round sets the cancel flag (ARGV[5] .. id .. ARGV[6]) of each of
# them to PREEMPT. Those flags' names come from the set's members, so they cannot be declared in KEYS: fine on
# one Redis server, not on a cluster. Reply: {admitted 0|1, the user queues' jobs (plus this one if admitted),
# task rounds preempted, the jobs of all three queues (KEYS[6] is the task queue) once it is done}. Atomic, so
# API replicas racing at the limit cannot overshoot, and a task round cannot slip in between a user round's
# admission and its preemption.
_ADMIT = """
local depth = redis.call('llen', KEYS[1]) + redis.call('llen', KEYS[2])
local limit = tonumber(ARGV[2])
if limit >= 0 and depth >= limit then
  redis.call('del', KEYS[5])
  return {0, depth, 0, depth + redis.call('llen', KEYS[6])}
end
if ARGV[3] == '1' then redis.call('lpush', KEYS[3], ARGV[1]) else redis.call('rpush', KEYS[3], ARGV[1]) end
local waiting = redis.call('llen', KEYS[1]) + redis.call('llen', KEYS[2]) + redis.call('llen', KEYS[6])
if ARGV[4] == 'task' then
  redis.call('sadd', KEYS[4], ARGV[1])
  return {1, depth + 1, 0, waiting}
end
local tasks = redis.call('smembers', KEYS[4])
for _, id in ipairs(tasks) do
  redis.call('set', ARGV[5] .. id .. ARGV[6], ARGV[7], 'EX', ARGV[8])
end
return {1, depth + 1, #tasks, waiting}
"""
_CANCEL_KEY_AROUND = keys.cancel_key("\n").split("\n")  # the flag's name before and after the job id


class AdmittingQueue(Queue):
    """RQ queue whose push is the admission check, so saving and admitting a job is one MULTI/EXEC."""

    def __init__(self, name: str, limit: int, **kwargs: Any) -> None:
        super().__init__(name, **kwargs)
        self.limit = limit
        self.role = "task" if name == keys.QUEUE_TASKS else "user"

    def push_job_id(self, job_id: str, pipeline: Any = None, at_front: bool = False) -> None:
        # RQ 2.x enqueue_job() saves the job, then calls push_job_id() as its last pipelined command.
        target = pipeline if pipeline is not None else self.connection
        target.eval(
            _ADMIT,
            6,
            *keys.RQ_USER_QUEUE_KEYS,
            self.key,
            keys.TASK_ROUNDS,
            keys.rq_job_key(job_id),
            keys.rq_queue_key(keys.QUEUE_TASKS),
            job_id,
            self.limit,
            "1" if at_front else "0",
            self.role,
            *_CANCEL_KEY_AROUND,
            keys.PREEMPT,
            keys.CANCEL_TTL,
        )


def admitting_queues(connection: Redis, limit: int) -> dict[tuple[str, bool], AdmittingQueue]:
    """(queue name, limited?) → queue; the unlimited ones take retried rounds, which were admitted once.
    A client task round is admitted only while no user round waits (limit 1 on the user queues' depth).
    `connection` only builds commands (see `push`): nothing is sent on it."""
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
    timeout: int  # RQ's job timeout (SIGALRM in the slot process): the round's own limits plus a margin
    ttl: int  # how long the job may wait in the queue
    description: str  # shows in RQ's logs: never the prompt


@dataclass(frozen=True)
class Admission:
    """The admit script's answer: whether the job is queued, the user queues' depth (what MAX_QUEUE_DEPTH
    counts), task rounds preempted, and the rounds waiting in all three queues (the agent_queue_depth gauge)."""

    admitted: bool
    depth: int
    preempted: int
    waiting: int


def stage(queue: AdmittingQueue, spec: JobSpec, at_front: bool) -> list[Command]:
    """RQ's commands that save and admit the job, built without I/O: enqueue_job() writes them into a sync
    pipeline that is never executed. The queue must know the server's version already (`push` sees to it)."""
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
    staged = queue.connection.pipeline()
    queue.enqueue_job(job, pipeline=staged, at_front=at_front)
    return list(staged.command_stack)


async def push(client: aioredis.Redis, queue: AdmittingQueue, spec: JobSpec, at_front: bool) -> Admission:
    """Save and admit the job in one MULTI/EXEC on the asyncio client."""
    if queue.redis_server_version is None:  # RQ would ask with a blocking INFO on its sync client, once
        info = await client.info("server")
        queue.redis_server_version = _version(str(info["redis_version"]))
    pipe = client.pipeline(transaction=True)
    for args, options in stage(queue, spec, at_front):
        pipe.execute_command(*args, **options)
    admitted, depth, preempted, waiting = (await pipe.execute())[-1]  # the admit script: RQ's last command
    return Admission(bool(admitted), int(depth), int(preempted), int(waiting))


def _version(text: str) -> tuple[int, int, int]:
    major, minor, patch = ([int(part) for part in text.split(".")[:3]] + [0, 0])[:3]
    return major, minor, patch


class RoundWorker(SimpleWorker):
    """One slot process of agent-worker: RQ's SimpleWorker (no fork: the process keeps its model connection and
    event loop from round to round), reconnecting to a restarted Redis within ~2 s instead of backing off to 60 s."""

    exponential_backoff_factor = 1.5
    max_connection_wait_time = 2.0
    log_result_lifespan = False


def round_worker(connection: Redis, name: str) -> RoundWorker:
    """An RQ worker reading the three queues in priority order (continuing rounds, new ones, client tasks)."""
    queues = [Queue(q, connection=connection, serializer=JSONSerializer) for q in keys.QUEUE_ORDER]
    # RQ's log line per job names the job id only (agent-worker's own log lines name the request)
    return RoundWorker(queues, connection=connection, serializer=JSONSerializer, name=name, log_job_description=False)
