"""agent.queue.reader against a real Redis: one held connection per round, entries in order, and a cancelled
read never leaves its reply for the next user of the connection."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aioredis

from agent.queue.reader import StreamReader
from tests.integration import queue_fixtures
from tests.integration.queue_fixtures import RedisServer

pytestmark = pytest.mark.integration
queue_redis = queue_fixtures.queue_redis


@pytest.fixture
async def client(queue_redis: RedisServer) -> AsyncIterator[aioredis.Redis]:
    pool = aioredis.BlockingConnectionPool(port=queue_redis.port, decode_responses=True, max_connections=1, timeout=2)
    redis = aioredis.Redis(connection_pool=pool)  # one connection: a reader's leftovers would reach the next user
    await redis.flushall()
    yield redis
    await redis.aclose()
    await pool.disconnect()


async def test_reads_the_entries_in_order_on_one_connection(client: aioredis.Redis) -> None:
    pool = client.connection_pool
    taken: list[Any] = []
    get_connection = pool.get_connection

    async def counted(*args: Any, **kwargs: Any) -> Any:
        taken.append(await get_connection(*args, **kwargs))  # type: ignore[no-untyped-call]
        return taken[-1]

    pool.get_connection = counted  # type: ignore[method-assign]
    async with StreamReader(pool, "s") as stream:
        assert await stream.read(count=10, block_ms=20) == []  # nothing yet: BLOCK ran out
        for text in ("a", "b", "c"):
            await _xadd_beside(client, stream, text)
        assert [data for _id, data in await stream.read(count=2, block_ms=20)] == ["a", "b"]
        assert [data for _id, data in await stream.read(count=10, block_ms=20)] == ["c"]
    assert len(taken) == 1  # every read of the round on the connection it took once
    assert await client.xlen("s") == 3  # and the connection went back to the pool


async def test_a_cancelled_read_leaves_nothing_for_the_next_reader(client: aioredis.Redis) -> None:
    pool = client.connection_pool

    async def follow() -> list[tuple[str, str]]:
        async with StreamReader(pool, "s") as stream:
            return await stream.read(count=10, block_ms=5000)

    reading = asyncio.create_task(follow())
    await asyncio.sleep(0.1)  # blocked in XREAD on the pool's only connection
    reading.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reading
    await client.xadd("s", {"e": "late"})  # the reply the cancelled XREAD would have got
    async with StreamReader(pool, "other") as other:
        assert await other.read(count=10, block_ms=20) == []  # not the cancelled read's reply for "s"
    assert await client.ping()


async def _xadd_beside(client: aioredis.Redis, stream: StreamReader, text: str) -> None:
    """XADD while the reader holds the pool's only connection: on a connection of its own."""
    writer = aioredis.Redis(port=client.connection_pool.connection_kwargs["port"])
    try:
        await writer.xadd(stream.key, {"e": text})
    finally:
        await writer.aclose()
