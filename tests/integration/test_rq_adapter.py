"""The RQ internals agent.queue.rq_adapter leans on, pinned against the installed RQ and a real Redis."""

from __future__ import annotations

import time

import pytest
from redis import Redis
from rq.serializers import JSONSerializer

from agent.queue import keys, rq_adapter
from tests.integration import queue_fixtures
from tests.integration.queue_fixtures import RedisServer

pytestmark = pytest.mark.integration
queue_redis = queue_fixtures.queue_redis


def spec(job_id: str) -> rq_adapter.JobSpec:
    return rq_adapter.JobSpec(job_id=job_id, args=({}, time.time(), job_id), timeout=60, ttl=60, description="t")


@pytest.fixture
def conn(queue_redis: RedisServer) -> Redis:
    client = Redis(port=queue_redis.port)
    client.flushall()
    return client


def test_enqueue_job_queues_the_push_as_its_last_pipelined_command(conn: Redis) -> None:
    """AdmittingQueue reads the admission reply as the pipeline's last result: RQ must push last."""
    queue = rq_adapter.AdmittingQueue(keys.QUEUE_NEW, 5, connection=conn, serializer=JSONSerializer)
    job = queue.create_job(rq_adapter.JOB_FUNCTION, args=(), job_id="pinned")
    with conn.pipeline() as pipe:
        queue.enqueue_job(job, pipeline=pipe)
        last_command = pipe.command_stack[-1][0]
        assert last_command[0] == "EVAL" and last_command[-3:] == ("pinned", 5, "0")
        assert pipe.execute()[-1] == 1


def test_push_admits_below_the_limit_and_refuses_at_it_leaving_nothing(conn: Redis) -> None:
    queues = rq_adapter.admitting_queues(conn, limit=2)
    limited = queues[keys.QUEUE_NEW, True]
    assert rq_adapter.push(limited, spec("a"), at_front=False) == (True, 1)
    assert rq_adapter.push(queues[keys.QUEUE_CONTINUING, True], spec("b"), at_front=False) == (True, 2)
    assert rq_adapter.push(limited, spec("c"), at_front=False) == (False, 2)
    assert not conn.exists(keys.rq_job_key("c"))
    assert rq_adapter.push(queues[keys.QUEUE_NEW, False], spec("d"), at_front=True) == (True, 3)  # a retry
    assert conn.lrange(keys.rq_queue_key(keys.QUEUE_NEW), 0, -1) == [b"d", b"a"]
