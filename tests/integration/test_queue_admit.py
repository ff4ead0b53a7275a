"""Admission (agent.queue.admit): the job is saved only when it is admitted, in one atomic step, so MAX_QUEUE_DEPTH
holds under racing API replicas and a refused round (the 429) leaves nothing behind."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis
from redis import Redis

from agent.backends.base import RoundRequest
from agent.errors import QueueFull
from agent.queue import admit, keys
from agent.queue.client import QueueBackend
from agent.settings import Settings
from tests.integration import queue_fixtures
from tests.integration.queue_fixtures import RedisServer
from tests.support import round_keys

pytestmark = pytest.mark.integration
queue_redis = queue_fixtures.queue_redis


def spec(job_id: str) -> admit.JobSpec:
    return admit.JobSpec(
        job_id=job_id, args=({}, time.time(), job_id), timeout=60, ttl=60, claim_ttl=60, description="t"
    )


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


async def test_push_admits_below_the_limit_and_refuses_at_it_leaving_nothing(
    conn: Redis, aconn: aioredis.Redis
) -> None:
    assert await admit.push(aconn, spec("a"), keys.QUEUE_NEW, 2, False, round_keys.signer()) == admit.Admission(
        True, 1, 0, 1
    )
    assert (await admit.push(aconn, spec("b"), keys.QUEUE_CONTINUING, 2, False, round_keys.signer())).depth == 2
    assert await admit.push(aconn, spec("c"), keys.QUEUE_NEW, 2, False, round_keys.signer()) == admit.Admission(
        False, 2, 0, 2
    )
    assert not conn.exists(keys.rq_job_key("c"))
    assert (await admit.push(aconn, spec("d"), keys.QUEUE_NEW, admit.NO_LIMIT, True, round_keys.signer())).depth == 3
    assert conn.lrange(keys.rq_queue_key(keys.QUEUE_NEW), 0, -1) == [b"d", b"a"]  # a retry goes first


async def test_racing_pushes_never_overshoot_the_limit(conn: Redis, queue_redis: RedisServer) -> None:
    """Many clients (API replicas) at once: exactly `limit` admitted, a hash only for each admitted round."""
    clients = [aioredis.Redis(port=queue_redis.port, decode_responses=True) for _ in range(8)]
    try:
        admissions = await asyncio.gather(
            *(
                admit.push(clients[i % 8], spec(f"r{i}"), keys.QUEUE_NEW, 10, False, round_keys.signer())
                for i in range(60)
            )
        )
    finally:
        for client in clients:
            await client.aclose()
    admitted = {f"r{i}" for i, a in enumerate(admissions) if a.admitted}
    assert len(admitted) == 10 and max(a.depth for a in admissions) == 10
    assert {k.decode().rsplit(":", 1)[1] for k in conn.scan_iter(keys.rq_job_key("*"))} == admitted
    assert conn.llen(keys.rq_queue_key(keys.QUEUE_NEW)) == 10


async def test_an_admitted_user_round_preempts_every_task_round_under_way(conn: Redis, aconn: aioredis.Redis) -> None:
    for task_id in ("t1", "t2"):
        assert (await admit.push(aconn, spec(task_id), keys.QUEUE_TASKS, 1, False, round_keys.signer())).admitted
    assert conn.smembers(keys.TASK_ROUNDS) == {b"t1", b"t2"}
    assert not conn.exists(keys.cancel_key("t1"))  # a task round preempts nobody
    admission = await admit.push(aconn, spec("user"), keys.QUEUE_NEW, 5, False, round_keys.signer())
    assert admission == admit.Admission(True, 1, 2, 3)  # the gauge counts the queued task rounds too
    for task_id in ("t1", "t2"):
        assert conn.get(keys.cancel_key(task_id)) == keys.PREEMPT.encode()
        assert 0 < conn.ttl(keys.cancel_key(task_id)) <= keys.CANCEL_TTL
    assert not conn.exists(keys.cancel_key("user"))


async def test_a_refused_task_round_is_not_tracked_and_preempts_nothing(conn: Redis, aconn: aioredis.Redis) -> None:
    assert (await admit.push(aconn, spec("user"), keys.QUEUE_NEW, 1, False, round_keys.signer())).admitted
    task_limit = admit.limit(keys.QUEUE_TASKS, 5, retried=False)
    refused = await admit.push(aconn, spec("task"), keys.QUEUE_TASKS, task_limit, False, round_keys.signer())
    assert refused == admit.Admission(False, 1, 0, 1)  # a user round waits
    assert not conn.exists(keys.TASK_ROUNDS, keys.rq_job_key("task"))
    conn.sadd(keys.TASK_ROUNDS, "running-task")
    assert not (await admit.push(aconn, spec("user2"), keys.QUEUE_NEW, 1, False, round_keys.signer())).admitted
    assert not conn.exists(keys.cancel_key("running-task"))  # only an admitted user round preempts


async def test_the_backend_answers_a_full_queue_with_queue_full_and_queues_nothing(
    conn: Redis, queue_redis: RedisServer
) -> None:
    """The 429: the round the script refused is not queued, its job hash never written."""
    conn.set(keys.worker_status_key("w"), '{"gpu_id": "gpu0", "slots": 1}')
    conn.sadd(keys.WORKERS_SET, "w")
    conn.rpush(keys.rq_queue_key(keys.QUEUE_NEW), "waiting-1", "waiting-2")
    backend = QueueBackend(Settings(redis_url=queue_redis.url, model_backend="queue", max_queue_depth=2))
    request = RoundRequest("qwen3:4b", [{"role": "user", "content": "hi"}], None, {}, request_id="full")
    try:
        with pytest.raises(QueueFull):
            async for _event in backend.stream_round(request):
                pass
    finally:
        await backend.aclose()
    assert conn.lrange(keys.rq_queue_key(keys.QUEUE_NEW), 0, -1) == [b"waiting-1", b"waiting-2"]
    assert list(conn.scan_iter(keys.rq_job_key("*"))) == []
