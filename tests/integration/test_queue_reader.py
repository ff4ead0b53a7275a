"""agent.queue.reader against a real Redis: a round's events are read from the host that claimed it, in order; any
other writer (a host writing before any claim, or one that never claimed, a claim by no worker host) fails the
round closed; a host added a moment ago is found; a cancelled read leaves nothing for the next user of its
connection. (The shipped ACL's side of it, with real workers: tests/regressions/test_one_host_answers_a_round.py.)"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from agent.errors import RoundIntruded
from agent.queue import keys
from agent.queue.reader import RoundReader, WorkerHosts
from tests.integration import queue_fixtures
from tests.integration.queue_fixtures import RedisServer

pytestmark = pytest.mark.integration
queue_redis = queue_fixtures.queue_redis
JOB = "job-1"


class Hosts(WorkerHosts):
    """The worker hosts as ACL USERS would list them (this Redis has no ACL users), counting the reads."""

    def __init__(self, redis: aioredis.Redis, *hosts: str) -> None:
        super().__init__(redis)
        self.listed, self.reads = set(hosts), 0

    async def known(self, fresh: bool = False) -> frozenset[str] | None:
        self.reads += 1
        return frozenset(self.listed)


@pytest.fixture
async def client(queue_redis: RedisServer) -> AsyncIterator[aioredis.Redis]:
    pool = aioredis.BlockingConnectionPool(port=queue_redis.port, decode_responses=True, max_connections=4, timeout=2)
    redis = aioredis.Redis(connection_pool=pool)
    await redis.flushall()
    await redis.xadd(keys.claim_key(JOB), {"admitted": "1"}, id="0-1")  # as the admit script opens it
    yield redis
    await redis.aclose()
    await pool.disconnect()


async def claim(client: aioredis.Redis, host: str, entry: str = "0-2") -> None:
    await client.xadd(keys.claim_key(JOB), {"host": host}, id=entry)


async def write(client: aioredis.Redis, host: str, *texts: str) -> None:
    for text in texts:
        await client.xadd(keys.events_key(host, JOB), {"e": json.dumps({"kind": "text", "text": text})})


async def test_the_claimants_events_in_order_and_nothing_before_the_claim(client: aioredis.Redis) -> None:
    reader = RoundReader(client, JOB, Hosts(client, "main", "gpu-2"))
    assert await reader.read(count=10, block_ms=20) == [] and reader.host is None
    await claim(client, "gpu-2")
    await write(client, "gpu-2", "a", "b", "c")
    assert [e["text"] for e in await reader.read(count=2, block_ms=20)] == ["a", "b"]
    assert reader.host == "gpu-2"
    assert [e["text"] for e in await reader.read(count=10, block_ms=20)] == ["c"]


@pytest.mark.parametrize(
    "intrusion",
    ["a host writes before any claim", "another host writes", "a second claim", "a claim by no worker host"],
)
async def test_any_other_writer_fails_the_round_closed(client: aioredis.Redis, intrusion: str) -> None:
    reader = RoundReader(client, JOB, Hosts(client, "main", "gpu-2"))
    await reader.read(count=10, block_ms=20)
    if intrusion == "a host writes before any claim":
        await write(client, "gpu-2", "click here")
    elif intrusion == "another host writes":
        await claim(client, "main")
        await write(client, "main", "real")
        assert [e["text"] for e in await reader.read(count=10, block_ms=20)] == ["real"]
        await write(client, "gpu-2", "click here")
    elif intrusion == "a second claim":
        await claim(client, "main")
        await claim(client, "gpu-2", "0-3")
    else:
        await claim(client, "gpu-9")
    with pytest.raises(RoundIntruded):
        await reader.read(count=10, block_ms=20)


async def test_a_claim_by_a_host_added_a_moment_ago_reads_the_list_again(client: aioredis.Redis) -> None:
    hosts = Hosts(client, "main")
    reader = RoundReader(client, JOB, hosts)
    await reader.read(count=10, block_ms=20)
    hosts.listed.add("gpu-3")  # scripts/worker-host add, then ACL LOAD
    await claim(client, "gpu-3")
    await write(client, "gpu-3", "hello")
    reads = hosts.reads
    assert [e["text"] for e in await reader.read(count=10, block_ms=20)] + [
        e["text"] for e in await reader.read(count=10, block_ms=20)
    ] == ["hello"]
    assert hosts.reads > reads and reader.host == "gpu-3"


async def test_without_the_acl_the_claimed_hosts_stream_alone_is_read(client: aioredis.Redis) -> None:
    reader = RoundReader(client, JOB, WorkerHosts(client))  # a Redis without worker users: hosts unknown
    assert await WorkerHosts(client).known() is None
    await claim(client, "main")
    await write(client, "main", "a")
    await write(client, "gpu-2", "never read")
    texts = [e["text"] for e in await reader.read(count=10, block_ms=20)]
    texts += [e["text"] for e in await reader.read(count=10, block_ms=20)]
    assert texts == ["a"]


async def test_a_cancelled_read_leaves_nothing_for_the_next_reader(queue_redis: RedisServer) -> None:
    pool = aioredis.BlockingConnectionPool(port=queue_redis.port, decode_responses=True, max_connections=1, timeout=2)
    client = aioredis.Redis(connection_pool=pool)  # one connection: a reader's leftovers would reach the next user
    try:
        await client.flushall()
        reading = asyncio.create_task(RoundReader(client, JOB, Hosts(client, "main")).read(count=10, block_ms=5000))
        await asyncio.sleep(0.1)  # blocked in XREAD on the pool's only connection
        reading.cancel()
        with pytest.raises(asyncio.CancelledError):
            await reading
        late = aioredis.Redis(port=queue_redis.port)
        await late.xadd(keys.claim_key(JOB), {"host": "main"}, id="0-2")  # the reply the cancelled XREAD would get
        await late.aclose()
        other = RoundReader(client, "other", Hosts(client, "main"))
        assert await other.read(count=10, block_ms=20) == [] and other.host is None
        assert await client.ping()
    finally:
        await client.aclose()
        await pool.disconnect()
