"""The Redis rate limiter across a Redis restart (a real redis-server killed and started on the same port): a
request that arrives while Redis is away waits for it (REDIS_RECONNECT_SECONDS) instead of a 503, a retried hit
is counted once, and past that wait the limiter still fails closed."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator

import pytest

from agent.security.ratelimit import KEY_PREFIX, LimiterUnavailable, RedisLimiter, make_limiter
from agent.settings import Settings
from tests.integration.queue_fixtures import RedisServer
from tests.support.procs import free_port

pytestmark = pytest.mark.integration
SHIPPED = Settings()  # the documented default of REDIS_RECONNECT_SECONDS


@pytest.fixture
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(free_port(), tmp_path_factory.mktemp("redis-limit"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
async def limiter(redis_server: RedisServer) -> AsyncIterator[RedisLimiter]:
    settings = Settings(redis_url=redis_server.url, rate_limit_per_minute=3, model_backend="queue")
    made = make_limiter(settings)
    assert isinstance(made, RedisLimiter)
    yield made
    await made.aclose()


async def test_the_shipped_default_rides_through_a_restart() -> None:
    assert SHIPPED.redis_reconnect_seconds >= 2.0  # a restart takes about a second: the default must cover it


async def test_a_hit_on_a_stale_connection_after_a_restart_is_answered(
    redis_server: RedisServer, limiter: RedisLimiter
) -> None:
    assert await limiter.hit("alice") is None  # the pool now holds a connection
    redis_server.kill()
    redis_server.start()  # the AOF brings alice's first hit back
    assert await limiter.hit("alice") is None
    assert redis_server.client().zcard(KEY_PREFIX + "alice") == 2


async def test_a_hit_while_redis_is_away_waits_for_it_and_counts_once(
    redis_server: RedisServer, limiter: RedisLimiter
) -> None:
    redis_server.kill()
    back = threading.Timer(1.0, redis_server.start)  # as a restart policy does, a second later
    back.start()
    try:
        assert await limiter.hit("bob") is None
    finally:
        back.join()
    assert redis_server.client().zcard(KEY_PREFIX + "bob") == 1
    assert await limiter.hit("bob") is None
    assert await limiter.hit("bob") is None
    assert await limiter.hit("bob") is not None  # the fourth of a 3-per-minute limit: still a limit


async def test_past_the_wait_it_still_fails_closed(redis_server: RedisServer) -> None:
    settings = Settings(redis_url=redis_server.url, rate_limit_per_minute=3, redis_reconnect_seconds=0.5)
    limiter = RedisLimiter(settings.redis_url, 3, reconnect_seconds=settings.redis_reconnect_seconds)
    try:
        redis_server.kill()
        with pytest.raises(LimiterUnavailable):
            await asyncio.wait_for(limiter.hit("carol"), 30)
    finally:
        await limiter.aclose()
