"""The RQ job the queue writes and reads, against the installed RQ and a real Redis: RQ builds each round's job, the
API's admission script saves RQ's hash of it (agent.queue.admit) as RQ's enqueue_job would, and the worker reads
it back with RQ's Job (agent.queue.rq_adapter)."""

from __future__ import annotations

import json
import time
import zlib
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest
import redis.asyncio as aioredis
from redis import Redis
from rq import Queue
from rq.job import Job
from rq.serializers import JSONSerializer

from agent.backends.base import RoundRequest
from agent.queue import admit, keys, rq_adapter
from tests.integration import queue_fixtures
from tests.integration.queue_fixtures import RedisServer
from tests.support import round_keys

pytestmark = pytest.mark.integration
queue_redis = queue_fixtures.queue_redis
TIMESTAMPS = {b"created_at", b"enqueued_at"}  # the fields two saves of the same job differ in, besides `data`'s bytes


def spec(job_id: str, args: tuple[Any, ...] | None = None) -> admit.JobSpec:
    args = args if args is not None else ({}, time.time(), job_id)
    return admit.JobSpec(job_id=job_id, args=args, timeout=60, ttl=60, claim_ttl=60, description="t")


def long_request() -> RoundRequest:
    """A conversation past 15 KB, non-ASCII text and tools included, as a round of a request under way."""
    turns = [{"role": "user", "content": f"Müşteri C{i} için işlemler: çğıöşü — ₺ 1.234,50 ✓ {i}"} for i in range(300)]
    tool = {"type": "function", "function": {"name": "müşteri_bul", "parameters": {"type": "object"}}}
    return RoundRequest("qwen3:4b", turns, [tool], {"num_ctx": 8192}, think=False, request_id="r-ş", round=2)


def job_hash(conn: Redis, job_id: str) -> dict[bytes, bytes]:
    """The job's saved hash, as the worker's claim reads it (a client without decode_responses: bytes)."""
    return cast(dict[bytes, bytes], conn.hgetall(keys.rq_job_key(job_id)))


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


async def test_push_saves_the_job_rq_itself_would_save(conn: Redis, aconn: aioredis.Redis) -> None:
    """Field for field RQ's enqueue_job hash, the same TTL, the queue in RQ's registry of queues."""
    args = (admit.request_fields(long_request()), 1.5, "ours")
    assert (await admit.push(aconn, spec("ours", args), keys.QUEUE_NEW, 5, False, round_keys.signer())).admitted
    queue = Queue(keys.QUEUE_NEW, connection=conn, serializer=JSONSerializer)
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
    ours, rqs = job_hash(conn, "ours"), job_hash(conn, "rqs")
    call = zlib.decompress(ours.pop(b"data"))
    assert call == zlib.decompress(rqs.pop(b"data"))  # RQ's JSON text, byte for byte
    meta = json.loads(ours.pop(b"meta"))  # RQ's own field, holding agent-api's signature of the call
    assert round_keys.verifier(max_age=1e12).refusal("ours", call, json.loads(call), {}, meta) is None
    assert {k: v for k, v in ours.items() if k not in TIMESTAMPS} == {
        k: v for k, v in rqs.items() if k not in TIMESTAMPS
    }
    assert set(ours) == set(rqs) and conn.ttl(keys.rq_job_key("ours")) == conn.ttl(keys.rq_job_key("rqs"))
    assert [q.name for q in Queue.all(connection=conn)] == [keys.QUEUE_NEW]


async def test_rq_and_the_worker_read_a_pushed_round_back_exactly(conn: Redis, aconn: aioredis.Redis) -> None:
    """RQ's Job.fetch (as agent-worker's slot processes, RQ's own worker, read it) gives back the round as sent:
    past 15 KB, non-ASCII intact."""
    request = long_request()
    assert len(json.dumps(request.to_dict(), ensure_ascii=False).encode()) > 15_000
    args = (admit.request_fields(request), 1733.25, "j1")
    assert (await admit.push(aconn, spec("j1", args), keys.QUEUE_CONTINUING, 5, False, round_keys.signer())).admitted
    job = Job.fetch("j1", connection=conn, serializer=JSONSerializer)
    assert (job.func_name, job.timeout, job.ttl, job.origin) == (rq_adapter.JOB_FUNCTION, 60, 60, keys.QUEUE_CONTINUING)
    assert (job.result_ttl, job.failure_ttl, job.description, job.get_status()) == (60, 3600, "t", "queued")
    assert Queue(keys.QUEUE_CONTINUING, connection=conn, serializer=JSONSerializer).job_ids == ["j1"]
    assert RoundRequest.from_dict(job.args[0]) == request
    assert tuple(job.args[1:]) == (1733.25, "j1")  # run_round(request, enqueued_at, job_id)


async def test_push_works_on_a_redis_that_forgot_the_script(conn: Redis, aconn: aioredis.Redis) -> None:
    """EVALSHA first; a restarted Redis (or SCRIPT FLUSH) answers NOSCRIPT and the script is sent once."""
    assert (await admit.push(aconn, spec("a"), keys.QUEUE_NEW, 5, False, round_keys.signer())).admitted
    conn.script_flush()
    assert (await admit.push(aconn, spec("b"), keys.QUEUE_NEW, 5, False, round_keys.signer())).depth == 2
    assert (await admit.push(aconn, spec("c"), keys.QUEUE_NEW, 5, False, round_keys.signer())).depth == 3
    assert conn.lrange(keys.rq_queue_key(keys.QUEUE_NEW), 0, -1) == [b"a", b"b", b"c"]


async def test_the_job_names_the_function_rq_adapter_names_at_push_time(
    conn: Redis, aconn: aioredis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """scripts/bench-queue --rq points the jobs at RQ's own worker function by setting rq_adapter.JOB_FUNCTION."""
    monkeypatch.setattr(rq_adapter, "JOB_FUNCTION", "tests.bench.rq_round.run_round")
    assert (await admit.push(aconn, spec("b"), keys.QUEUE_NEW, 5, False, round_keys.signer())).admitted
    assert Job.fetch("b", connection=conn, serializer=JSONSerializer).func_name == "tests.bench.rq_round.run_round"
