"""The RQ internals agent.queue.rq_adapter leans on, pinned against the installed RQ and a real Redis."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aioredis
from redis import Redis
from rq.serializers import JSONSerializer

from agent.queue import keys, rq_adapter
from tests.integration import queue_fixtures
from tests.integration.queue_fixtures import RedisServer
from tests.support.procs import free_port

pytestmark = pytest.mark.integration
queue_redis = queue_fixtures.queue_redis
TIMESTAMPS = {b"created_at", b"enqueued_at"}  # the only fields two saves of the same job may differ in


def spec(job_id: str, args: tuple[Any, ...] | None = None) -> rq_adapter.JobSpec:
    args = args if args is not None else ({}, time.time(), job_id)
    return rq_adapter.JobSpec(job_id=job_id, args=args, timeout=60, ttl=60, description="t")


@pytest.fixture
def conn(queue_redis: RedisServer) -> Redis:
    client = Redis(port=queue_redis.port)
    client.flushall()
    return client


@pytest.fixture
async def aconn(conn: Redis, queue_redis: RedisServer) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis(port=queue_redis.port, decode_responses=True)  # as the API's client
    yield client
    await client.aclose()


def test_enqueue_job_queues_the_push_as_its_last_pipelined_command(conn: Redis) -> None:
    """push reads the admission reply as the transaction's last result: RQ must push last."""
    queue = rq_adapter.AdmittingQueue(keys.QUEUE_NEW, 5, connection=conn, serializer=JSONSerializer)
    job = queue.create_job(rq_adapter.JOB_FUNCTION, args=(), job_id="pinned")
    with conn.pipeline() as pipe:
        queue.enqueue_job(job, pipeline=pipe)
        last_command = pipe.command_stack[-1][0]
        assert last_command[0] == "EVAL" and "pinned" in last_command
        assert pipe.execute()[-1] == [1, 1, 0, 1]


def test_rq_stages_a_job_as_args_and_options_without_any_io() -> None:
    """push replays RQ's pipelined commands on the asyncio client: RQ must only stack (args, options) on the
    sync pipeline, never send a command itself (this connection's port has no server)."""
    queues = rq_adapter.admitting_queues(Redis(port=free_port(), socket_connect_timeout=0.2), limit=5)
    queue = queues[keys.QUEUE_NEW, True]
    queue.redis_server_version = (7, 0, 0)  # what push learns once with an INFO on the asyncio client
    commands = rq_adapter.stage(queue, spec("staged"), at_front=False)
    assert all(isinstance(args, tuple) and isinstance(options, dict) for args, options in commands)
    assert commands[-1][0][0] == "EVAL"
    assert keys.rq_job_key("staged") in {args[1] for args, _ in commands if args[0] == "HSET"}


async def test_push_saves_the_job_rq_itself_would_save(conn: Redis, aconn: aioredis.Redis) -> None:
    """The worker restores the job with RQ's Job.restore: the hash push writes must be RQ's, byte for byte."""
    queues = rq_adapter.admitting_queues(conn, limit=5)
    args = ({"model": "m", "messages": [{"role": "user", "content": "é"}]}, 1.5, "same")
    assert (await rq_adapter.push(aconn, queues[keys.QUEUE_NEW, True], spec("ours", args), False)).admitted
    queue = queues[keys.QUEUE_NEW, False]
    job = queue.create_job(
        rq_adapter.JOB_FUNCTION,
        args=args,
        job_id="rqs",
        timeout=60,
        result_ttl=rq_adapter.RESULT_TTL,
        failure_ttl=rq_adapter.FAILURE_TTL,
        ttl=60,
        description="t",
    )
    queue.enqueue_job(job)  # RQ's own pipeline, executed by RQ on the sync client
    ours, rqs = conn.hgetall(keys.rq_job_key("ours")), conn.hgetall(keys.rq_job_key("rqs"))
    assert {k: v for k, v in ours.items() if k not in TIMESTAMPS} == {
        k: v for k, v in rqs.items() if k not in TIMESTAMPS
    }
    assert set(ours) == set(rqs) and conn.ttl(keys.rq_job_key("ours")) == conn.ttl(keys.rq_job_key("rqs"))


async def test_push_admits_below_the_limit_and_refuses_at_it_leaving_nothing(
    conn: Redis, aconn: aioredis.Redis
) -> None:
    queues = rq_adapter.admitting_queues(conn, limit=2)
    limited = queues[keys.QUEUE_NEW, True]
    assert await rq_adapter.push(aconn, limited, spec("a"), at_front=False) == rq_adapter.Admission(True, 1, 0, 1)
    assert (await rq_adapter.push(aconn, queues[keys.QUEUE_CONTINUING, True], spec("b"), False)).depth == 2
    assert await rq_adapter.push(aconn, limited, spec("c"), at_front=False) == rq_adapter.Admission(False, 2, 0, 2)
    assert not conn.exists(keys.rq_job_key("c"))
    assert (await rq_adapter.push(aconn, queues[keys.QUEUE_NEW, False], spec("d"), at_front=True)).depth == 3
    assert conn.lrange(keys.rq_queue_key(keys.QUEUE_NEW), 0, -1) == [b"d", b"a"]  # a retry goes first


async def test_an_admitted_user_round_preempts_every_task_round_under_way(conn: Redis, aconn: aioredis.Redis) -> None:
    queues = rq_adapter.admitting_queues(conn, limit=5)
    for task_id in ("t1", "t2"):
        assert (await rq_adapter.push(aconn, queues[keys.QUEUE_TASKS, True], spec(task_id), False)).admitted
    assert conn.smembers(keys.TASK_ROUNDS) == {b"t1", b"t2"}
    assert not conn.exists(keys.cancel_key("t1"))  # a task round preempts nobody
    admission = await rq_adapter.push(aconn, queues[keys.QUEUE_NEW, True], spec("user"), False)
    assert admission == rq_adapter.Admission(True, 1, 2, 3)  # the gauge counts the queued task rounds too
    for task_id in ("t1", "t2"):
        assert conn.get(keys.cancel_key(task_id)) == keys.PREEMPT.encode()
        assert 0 < conn.ttl(keys.cancel_key(task_id)) <= keys.CANCEL_TTL
    assert not conn.exists(keys.cancel_key("user"))


async def test_a_refused_task_round_is_not_tracked_and_preempts_nothing(conn: Redis, aconn: aioredis.Redis) -> None:
    queues = rq_adapter.admitting_queues(conn, limit=1)
    assert (await rq_adapter.push(aconn, queues[keys.QUEUE_NEW, True], spec("user"), False)).admitted
    refused = await rq_adapter.push(aconn, queues[keys.QUEUE_TASKS, True], spec("task"), False)
    assert refused == rq_adapter.Admission(False, 1, 0, 1)  # a user round waits
    assert not conn.exists(keys.TASK_ROUNDS, keys.rq_job_key("task"))
    conn.sadd(keys.TASK_ROUNDS, "running-task")
    assert not (await rq_adapter.push(aconn, queues[keys.QUEUE_NEW, True], spec("user2"), False)).admitted
    assert not conn.exists(keys.cancel_key("running-task"))  # only an admitted user round preempts
