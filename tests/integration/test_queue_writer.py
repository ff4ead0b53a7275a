"""The worker's event writer and its wire against a real Redis: an append refused because someone else wrote the
stream ends the round as intruded (never taken for a duplicate), another refusal is raised, replies stay in step
with their commands."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import cast

import pytest
import redis.asyncio as aioredis
import structlog.testing
from redis.exceptions import ResponseError

from agent.queue import writer as writer_module
from agent.queue.keys import events_key
from agent.queue.wire import call, round_trip
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
    real = writer._round_trip

    async def counted(commands: list[tuple[object, ...]]) -> list[object]:
        trips.append(sum(1 for c in commands if c[0] == "XADD"))
        return await real(commands)

    monkeypatch.setattr(writer, "_round_trip", counted)
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


async def test_a_round_trip_returns_error_replies_in_place_and_its_connection_stays_in_step(
    client: aioredis.Redis,
) -> None:
    await client.set("text", "x")
    conn = await client.connection_pool.get_connection()  # type: ignore[no-untyped-call]
    try:
        replies = await round_trip(conn, [("INCR", "counter"), ("LPUSH", "text", "y"), ("GET", "text")])
        assert replies[0] == 1 and replies[2] == b"x"
        assert isinstance(replies[1], ResponseError) and "WRONGTYPE" in str(replies[1])
        assert await round_trip(conn, [("INCR", "counter")]) == [2]  # the next reply is the next command's
    finally:
        await client.connection_pool.release(conn)
    assert await call(client, "GET", "counter") == b"2"
    with pytest.raises(ResponseError, match="WRONGTYPE"):
        await call(client, "LPUSH", "text", "z")


async def test_a_round_trip_cancelled_before_its_replies_leaves_no_reply_for_the_next_command(
    client: aioredis.Redis,
) -> None:
    conn = await client.connection_pool.get_connection()  # type: ignore[no-untyped-call]
    try:
        blocked = asyncio.create_task(round_trip(conn, [("BLPOP", "nothing", 5)]))
        await asyncio.sleep(0.1)
        blocked.cancel()
        with pytest.raises(asyncio.CancelledError):
            await blocked
        await client.rpush("nothing", "late")  # had the BLPOP stayed on the socket, it would take this
        assert await round_trip(conn, [("PING",)]) == [b"PONG"]  # reconnected, in step
        assert await client.lrange("nothing", 0, -1) == [b"late"]
    finally:
        await client.connection_pool.release(conn)
