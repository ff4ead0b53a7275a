"""The API's reader of one round's event stream: XREAD BLOCK on one connection held while the round is followed.

redis-py's command path takes a connection from the pool and gives it back, runs the retry and
observability wrappers and turns the reply into dicts on every call; a round reads its stream several
times (accepted, started, each burst of tokens, done), and on a busy 2-core host that path was a measurable
part of the queue hop. Here a round takes one connection from the client's pool when it starts following
and returns it at the end; each read is one send and one reply on it. The pool still checks the connection
when it hands it out (a socket left stale by a Redis restart is reopened then).
"""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.connection import AbstractConnection
from redis.exceptions import ResponseError

from agent.queue.wire import round_trip


class StreamReader:
    """Reads the entries of one stream in order, each entry's `field` value with its id."""

    def __init__(self, pool: aioredis.ConnectionPool, key: str, field: str = "e") -> None:
        self.pool, self.key, self.field = pool, key, field
        self.last = "0-0"  # id of the last entry returned
        self._conn: AbstractConnection | None = None

    async def __aenter__(self) -> StreamReader:
        self._conn = await self.pool.get_connection()  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:  # shielded: a cancelled release would leave the connection counted as in use
            await asyncio.shield(self.pool.release(conn))

    async def read(self, count: int, block_ms: int) -> list[tuple[str, str]]:
        """Up to `count` entries after the last one returned, waiting up to `block_ms` for the first;
        [] when none came."""
        conn = self._conn
        if conn is None:
            raise RuntimeError("StreamReader.read outside `async with`")
        # round_trip disconnects on a failed or cancelled read: a reply still on its way cannot reach the next one
        (reply,) = await round_trip(
            conn, [("XREAD", "BLOCK", block_ms, "COUNT", count, "STREAMS", self.key, self.last)]
        )
        if isinstance(reply, ResponseError):
            raise reply
        entries = _entries(reply)
        if entries:
            self.last = entries[-1][0]
        return [(entry_id, str(fields[fields.index(self.field) + 1])) for entry_id, fields in entries]


def _entries(reply: Any) -> list[tuple[str, list[Any]]]:
    """The one stream's entries from an XREAD reply: RESP2 [[key, entries]], RESP3 {key: entries}, or nil."""
    if not reply:
        return []
    streams = list(reply.values()) if isinstance(reply, dict) else [entries for _key, entries in reply]
    return [(str(entry_id), list(fields)) for entry_id, fields in streams[0]]
