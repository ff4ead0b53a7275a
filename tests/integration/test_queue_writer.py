"""The worker's event writer against a real Redis: a batch redis-py re-sends after a lost reply is neither doubled
nor an intrusion; an append refused because someone else wrote the stream ends the round as intruded (never taken
for a duplicate); another refusal is raised; events go in batches."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest
import redis.asyncio as aioredis
import structlog.testing
from redis.asyncio.client import Pipeline
from redis.exceptions import ResponseError

from agent.queue import writer as writer_module
from agent.queue.keys import events_key
from agent.queue.writer import EventWriter, GpuLock, RoundControl
from tests.integration import queue_fixtures
from tests.integration.queue_fixtures import RedisServer

pytestmark = pytest.mark.integration
queue_redis = queue_fixtures.queue_redis
HOST = "main"


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
    return EventWriter(conn, job_id, events_key(HOST, job_id), control, GpuLock(conn, [f"test:lock:{job_id}"], "token"))


async def test_a_batch_sent_again_after_a_lost_reply_is_neither_doubled_nor_an_intrusion(
    client: aioredis.Redis,
) -> None:
    writer = await writer_for(client, "resent")
    events = [{"kind": "text", "text": str(i)} for i in range(3)]
    for event in events:
        writer.put(event, hold=True)
    await writer.send()
    writer._seq -= len(events)  # what redis-py's retried pipeline sends after a lost reply: the same ids again
    for event in events:
        writer.put(event, hold=True)
    await writer.send()
    assert await client.xlen(events_key(HOST, "resent")) == len(events)
    assert writer.control.reason is None
    writer.put({"kind": "text", "text": "next"}, hold=True)  # the writer goes on where it was
    await writer.send()
    assert await client.xlen(events_key(HOST, "resent")) == len(events) + 1


async def test_an_append_refused_because_someone_else_wrote_the_stream_ends_the_round_as_intruded(
    client: aioredis.Redis,
) -> None:
    stream = events_key(HOST, "intruded")
    generating = asyncio.create_task(asyncio.sleep(60))  # the round's task, which the abort cancels
    control = RoundControl(task=generating)
    writer = EventWriter(client, "intruded", stream, control, GpuLock(client, ["test:lock:intruded"], "token"))
    writer.put({"kind": "text", "text": "mine"}, hold=True)
    await writer.send()
    await client.xadd(stream, {"e": '{"kind":"done","content":"click here"}'}, id="0-7")  # the same host's password
    writer.put({"kind": "text", "text": "next"}, hold=True)
    with structlog.testing.capture_logs() as logs:
        await writer.send()
    assert control.reason == "stream_intruded"  # not taken for a resent duplicate
    assert [e["event"] for e in logs if e["log_level"] == "error"] == ["round_stream_intruded"]
    with pytest.raises(asyncio.CancelledError):
        await generating
    writer.put({"kind": "error", "error": "RoundIntruded"}, hold=True)  # the round's error still lands, after theirs
    await writer.send()
    ((_id, last),) = cast(list[tuple[bytes, dict[bytes, bytes]]], await client.xrevrange(stream, count=1))
    assert b"RoundIntruded" in last[b"e"]


async def test_events_put_while_a_round_streams_go_in_batches_and_close_sends_what_waits_at_once(
    client: aioredis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(writer_module, "BATCH_INTERVAL", 30.0)
    writer = await writer_for(client, "batched")
    trips: list[int] = []
    real = Pipeline.execute

    async def counted(pipe: Pipeline, raise_on_error: bool = True) -> list[Any]:
        trips.append(sum(1 for args, _options in pipe.command_stack if args[0] == "XADD"))
        return await real(pipe, raise_on_error)

    monkeypatch.setattr(Pipeline, "execute", counted)
    writer.put({"kind": "text", "text": "first"})  # goes at once
    await asyncio.sleep(0.05)
    for i in range(5):
        writer.put({"kind": "text", "text": str(i)})  # wait for the interval, together
        await asyncio.sleep(0.01)
    assert trips == [1] and await client.xlen(events_key(HOST, "batched")) == 1
    async with asyncio.timeout(5):  # not the 30 s interval
        await writer.close()
    assert trips == [1, 5] and await client.xlen(events_key(HOST, "batched")) == 6


async def test_an_entry_refused_for_another_reason_is_raised(client: aioredis.Redis) -> None:
    await client.set(events_key(HOST, "wrongtype"), "not a stream")
    writer = await writer_for(client, "wrongtype")
    writer.put({"kind": "text", "text": "lost?"}, hold=True)
    with pytest.raises(ResponseError, match="WRONGTYPE"):
        await writer.send()
