"""The worker's event writer against a real Redis: a re-sent batch is not doubled, a real refusal is raised."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis
from redis.exceptions import ResponseError

from agent.queue.keys import events_key
from agent.queue.writer import EventWriter, GpuLock, RoundControl
from tests.integration import queue_fixtures
from tests.integration.queue_fixtures import RedisServer

pytestmark = pytest.mark.integration
queue_redis = queue_fixtures.queue_redis


@pytest.fixture
async def client(queue_redis: RedisServer) -> AsyncIterator[aioredis.Redis]:
    queue_redis.client().flushall()
    conn = aioredis.Redis(port=queue_redis.port)
    yield conn
    await conn.aclose()


async def writer_for(conn: aioredis.Redis, job_id: str) -> EventWriter:
    task = asyncio.current_task()
    assert task is not None
    control = RoundControl(task=task)  # never aborted here: no cancel flag, no lock to refresh
    return EventWriter(conn, job_id, control, GpuLock(conn, [f"test:lock:{job_id}"], "token", f"test:waiting:{job_id}"))


async def test_a_batch_sent_again_after_a_lost_reply_is_neither_doubled_nor_an_error(client: aioredis.Redis) -> None:
    writer = await writer_for(client, "resent")
    events = [{"kind": "text", "text": str(i)} for i in range(3)]
    for event in events:
        writer.put(event, hold=True)
    await writer.send()
    writer._seq -= len(events)  # what a pipeline retried after its reply was lost sends: the same ids again
    for event in events:
        writer.put(event, hold=True)
    await writer.send()
    assert await client.xlen(events_key("resent")) == len(events)
    writer.put({"kind": "text", "text": "next"}, hold=True)  # the writer goes on where it was
    await writer.send()
    assert await client.xlen(events_key("resent")) == len(events) + 1


async def test_an_entry_refused_for_another_reason_is_raised(client: aioredis.Redis) -> None:
    await client.set(events_key("wrongtype"), "not a stream")
    writer = await writer_for(client, "wrongtype")
    writer.put({"kind": "text", "text": "lost?"}, hold=True)
    with pytest.raises(ResponseError, match="WRONGTYPE"):
        await writer.send()
