"""Commands sent straight on one Redis connection: the worker's per-token path and the API's enqueue.

redis-py's command and pipeline path (pool checkout, retry and observability wrappers, reply callbacks) costs
about 0.5 ms of Python per call on the 2-core hosts this runs on. The worker makes one such call per batch of
tokens, the API one per enqueue (agent.queue.admit), and the call in flight when a generation ends
delays the next round (measured with scripts/bench-queue), so these go out as one packed write and come back as
raw replies. A connection error leaves the connection disconnected (a reply may still be on its way) and
propagates; the caller decides what fails.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.connection import AbstractConnection
from redis.exceptions import ResponseError


async def round_trip(conn: AbstractConnection, commands: Sequence[tuple[Any, ...]]) -> list[Any]:
    """Send the commands at once and read every reply; an error reply comes back as its ResponseError."""
    try:
        await conn.send_packed_command(conn.pack_commands(commands))
        replies: list[Any] = []
        for _ in commands:
            try:
                replies.append(await conn.read_response())
            except ResponseError as exc:  # the error reply was read whole: the connection stays in step
                replies.append(exc)
    except BaseException:
        await conn.disconnect(nowait=True)
        raise
    return replies


async def call(client: aioredis.Redis, *command: Any) -> Any:
    """One command on a connection of the client's pool; its error reply raised."""
    pool = client.connection_pool
    conn = await pool.get_connection()  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
    try:
        (reply,) = await round_trip(conn, [command])
    finally:
        await pool.release(conn)
    if isinstance(reply, ResponseError):
        raise reply
    return reply
