"""Per-user request rate limits: a sliding one-minute window, in Redis (shared by API replicas) or in memory.

The Redis window is one sorted set per user scored by Redis' own clock, updated by one Lua script, so
several agent-api replicas count the same requests. The memory window is per process: with N replicas a
user gets up to N times the limit (fine for one replica, documented for more).

The Redis limiter rides through a Redis restart (REDIS_RECONNECT_SECONDS, tries with backoff: the script is
idempotent, a retry re-adds the same member) and then fails closed: when it cannot decide (Redis down past that
wait, too slow, its bounded connection pool busy past the wait) the request gets a 503 saying so, never a free
pass. A limit that holds only while Redis is healthy would not be a limit under the very load it exists for.

redis is imported by the Redis limiter only: direct mode keeps its window in memory, and importing redis cost its
app process 18 MB (issue 38).
"""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from agent.errors import AgentError, DependencyDown
from agent.settings import Settings

if TYPE_CHECKING:
    import redis.asyncio as aioredis

log = structlog.get_logger("agent.security.ratelimit")
WINDOW_S = 60.0
KEY_PREFIX = "agent:ratelimit:"
POOL_SIZE = 32  # connections per process; a burst waits for one instead of opening hundreds
WAIT_S = 5.0  # how long a request may wait for the limiter's answer before it is refused with 503

# Returns -1 when admitted, else milliseconds until the oldest request in the window leaves it.
SLIDING_WINDOW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], 0, now - window)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('ZADD', KEYS[1], now, ARGV[3])
  redis.call('PEXPIRE', KEYS[1], window)
  return -1
end
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return math.max(1, tonumber(oldest[2]) + window - now)
"""


class RateLimited(AgentError):
    status = 429
    type = "rate_limit_error"
    code = "rate_limited"
    public: str | None = None  # the message names the limit and the wait: the client's to read


class LimiterUnavailable(DependencyDown):
    code = "rate_limiter_unavailable"
    public = (
        "The rate limiter is unavailable, so requests are refused rather than admitted unchecked. "
        "Try again in a minute; if it keeps happening, tell the operator."
    )


class RateLimiter(Protocol):
    async def hit(self, key: str) -> float | None:
        """Count one request for `key`; None when admitted, else seconds until one would be."""

    async def aclose(self) -> None: ...


class NoLimit:
    async def hit(self, key: str) -> float | None:
        return None

    async def aclose(self) -> None:
        return None


class MemoryLimiter:
    """Sliding window log per key, in this process only."""

    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.limit, self.clock = per_minute, clock
        self._hits: dict[str, deque[float]] = {}
        self._lock = asyncio.Lock()

    async def hit(self, key: str) -> float | None:
        now = self.clock()
        async with self._lock:
            hits = self._hits.setdefault(key, deque())
            while hits and hits[0] <= now - WINDOW_S:
                hits.popleft()
            if len(hits) < self.limit:
                hits.append(now)
                return None
            return max(0.001, hits[0] + WINDOW_S - now)

    async def aclose(self) -> None:
        return None


class RedisLimiter:
    def __init__(
        self, url: str, per_minute: int, options: dict[str, Any] | None = None, reconnect_seconds: float = 0.0
    ) -> None:
        import redis.asyncio as aioredis  # here only: see the module's docstring

        self.limit, self.reconnect_seconds = per_minute, reconnect_seconds
        pool = aioredis.BlockingConnectionPool.from_url(
            url,
            **(options or {}),
            max_connections=POOL_SIZE,
            timeout=WAIT_S,
            socket_connect_timeout=1.0,
            socket_timeout=WAIT_S,
        )
        self.redis: aioredis.Redis = aioredis.Redis(connection_pool=pool)
        self._script = self.redis.register_script(SLIDING_WINDOW)

    async def hit(self, key: str) -> float | None:
        from redis.exceptions import RedisError  # loaded by __init__ already: a lookup, not an import

        from agent.redisconn import ride_through

        args: list[int | str] = [int(WINDOW_S * 1000), self.limit, uuid.uuid4().hex]  # one member for every try

        async def once() -> Any:
            async with asyncio.timeout(WAIT_S * 2):  # pool wait plus the answer, whatever redis-py does
                return await self._script(keys=[KEY_PREFIX + key], args=args)

        try:
            wait_ms = int(await ride_through(once, self.reconnect_seconds, "rate limit"))
        except (RedisError, OSError, TimeoutError) as exc:
            log.warning("rate_limit_unavailable", error=type(exc).__name__)
            raise LimiterUnavailable(
                "The rate limiter cannot reach Redis, so this request is refused rather than admitted unchecked. "
                "Try again shortly; operators: check the redis service.",
                retry_after=WAIT_S,
            ) from exc
        return None if wait_ms < 0 else wait_ms / 1000

    async def aclose(self) -> None:
        await self.redis.aclose()
        await self.redis.connection_pool.disconnect()  # a pool handed to Redis() is not closed by it


def make_limiter(settings: Settings) -> RateLimiter:
    if settings.rate_limit_per_minute == 0:
        return NoLimit()
    backend = settings.rate_limit_backend
    if backend == "auto":
        backend = "redis" if settings.model_backend == "queue" else "memory"
    if backend == "redis":
        from agent.redisconn import connection_options  # redis with it: only for this limiter

        return RedisLimiter(
            settings.redis_url,
            settings.rate_limit_per_minute,
            connection_options(settings),
            settings.redis_reconnect_seconds,
        )
    return MemoryLimiter(settings.rate_limit_per_minute)


async def enforce(limiter: RateLimiter, key: str, per_minute: int) -> None:
    """Raise RateLimited (429 with Retry-After) when `key` used up its requests for the last minute."""
    wait = await limiter.hit(key)
    if wait is not None:
        raise RateLimited(
            f"Rate limit reached: at most {per_minute} requests per minute per user (RATE_LIMIT_PER_MINUTE). "
            f"Try again in {max(1, math.ceil(wait))} s.",
            retry_after=wait,
        )
