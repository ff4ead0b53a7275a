"""Worker side of a round's event stream: batched writes, pings, the cancel flag and the GPU's slot lock.

The worker relays a round's events to the API through a per-job Redis stream (agent.queue.keys.events_key;
entry ids 0-1, 0-2, … so a re-sent XADD is refused, never doubled). The entry kinds are listed in
agent.queue.events. Every write also checks the cancel flag the API sets when its client went away, and
refreshes the round's GPU slot while the round streams; the last batch releases it and records the round time.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import RedisError, ResponseError

from agent.queue.keys import (
    LOCK_TTL_MS,
    PREEMPT,
    ROUND_TIMES,
    ROUND_TIMES_KEPT,
    STREAM_TTL,
    cancel_key,
    events_key,
)

PING_INTERVAL = 0.5  # seconds of silence after which the worker writes a ping
LOCK_REFRESH = 1.0
LOCK_POLL = 0.005  # only a second worker on the same GPU (or a slot of a killed one) ever waits here

_REFRESH = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end return 0"
_TAKE = """
for i, key in ipairs(KEYS) do
  if redis.call('set', key, ARGV[1], 'NX', 'PX', ARGV[2]) then return i end
end
return 0
"""
_RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"


@dataclass
class RoundControl:
    """Why a round stops early; the first reason wins and cancels the round's task."""

    task: asyncio.Task[Any]
    reason: str | None = None
    detail: str = ""
    finished: bool = False  # past this point an abort must not cancel the task's cleanup

    def abort(self, reason: str, detail: str = "") -> None:
        if self.reason is None and not self.finished:
            self.reason, self.detail = reason, detail
            self.task.cancel()


class GpuLock:
    """A counted lock in Redis: one `SET NX PX` key per slot of the backend (agent.queue.keys.gpu_slot_keys).

    At most WORKER_SLOTS rounds hold one at a time, whichever worker runs them, even a second worker started
    on the same GPU by mistake. The EventWriter tries it, refreshes the slot it got while the round streams
    and releases it with the last events; a killed worker's slots expire after LOCK_TTL_MS.
    """

    def __init__(self, redis: aioredis.Redis, keys: list[str], token: str) -> None:
        self.redis, self.keys, self.token = redis, keys, token
        self.key: str | None = None  # the slot held
        self.refreshed = 0.0

    @property
    def held(self) -> bool:
        return self.key is not None

    def take_args(self) -> tuple[Any, ...]:
        """EVAL arguments of one try for any free slot (the reply is the slot's 1-based index, or 0)."""
        return (_TAKE, len(self.keys), *self.keys, self.token, LOCK_TTL_MS)

    async def acquire(self) -> None:
        # The slots live in Redis (shared with other workers), so there is no local Event to wait on.
        while not self.taken(await self.redis.eval(*self.take_args())):  # noqa: ASYNC110
            await asyncio.sleep(LOCK_POLL)

    def taken(self, index: Any) -> bool:
        if index:
            self.key, self.refreshed = self.keys[int(index) - 1], time.monotonic()
        return self.held

    def refresh_due(self) -> bool:
        return self.held and time.monotonic() - self.refreshed >= LOCK_REFRESH


@dataclass
class EventWriter:
    """Sends pending events in one pipeline per batch; pings, checks the cancel flag, minds the lock."""

    redis: aioredis.Redis
    job_id: str
    control: RoundControl
    lock: GpuLock
    round_time: float | None = None  # recorded with the last batch (Retry-After estimates)
    _pending: list[str] = field(default_factory=list)
    _seq: int = 0
    _wake: asyncio.Event = field(default_factory=asyncio.Event)
    _send_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _task: asyncio.Task[None] | None = None
    _closed: bool = False

    def put(self, data: dict[str, Any], last: bool = False) -> None:
        """Queue an event; the last one waits for close(), which sends it with the lock release."""
        self._pending.append(json.dumps(data, separators=(",", ":")))
        if last:
            return
        self._wake.set()
        if self._task is None:
            self._task = asyncio.create_task(self._run())

    async def send(self, try_lock: bool = False, final: bool = False) -> None:
        """Write what is pending now (in order with the background sends) plus the checks that ride along."""
        async with self._send_lock:
            batch, self._pending = self._pending, []
            pipe = self.redis.pipeline(transaction=False)
            for data in batch:
                self._seq += 1
                pipe.xadd(events_key(self.job_id), {"e": data}, id=f"0-{self._seq}")
            pipe.expire(events_key(self.job_id), STREAM_TTL)
            checks: list[Callable[[Any], object]] = [self._on_cancel_flag]
            pipe.get(cancel_key(self.job_id))
            if try_lock:
                pipe.eval(*self.lock.take_args())
                checks.append(self.lock.taken)
            elif final and self.lock.key is not None:
                pipe.eval(_RELEASE, 1, self.lock.key, self.lock.token)
                self.lock.key = None
                checks.append(lambda _: None)
            elif self.lock.refresh_due() and self.lock.key is not None:
                pipe.eval(_REFRESH, 1, self.lock.key, self.lock.token, LOCK_TTL_MS)
                checks.append(self._on_refresh)
            if final and self.round_time is not None:
                pipe.lpush(ROUND_TIMES, f"{self.round_time:.4f}")
                pipe.ltrim(ROUND_TIMES, 0, ROUND_TIMES_KEPT - 1)
            results = await pipe.execute(raise_on_error=False)
            await self._raise_errors(results, len(batch))
        for check, result in zip(checks, results[len(batch) + 1 :], strict=False):
            check(result)

    async def _raise_errors(self, results: list[Any], sent: int) -> None:
        """Raise the first failed command, except XADDs refused because the stream already holds their id.

        A batch re-sent after a lost reply finds its entries written: the stream's last id, not the error's
        text, tells a duplicate from a real failure (a wrong-typed key, a full memory).
        """
        for result in results[sent:]:
            if isinstance(result, Exception):
                raise result
        first = self._seq - sent + 1
        refused = [(first + i, r) for i, r in enumerate(results[:sent]) if isinstance(r, Exception)]
        if not refused:
            return
        try:
            info = await self.redis.xinfo_stream(events_key(self.job_id))
        except ResponseError:  # no stream (or not a stream): nothing was written before, the refusal is real
            raise refused[0][1] from None
        last_id = info["last-generated-id"]
        top = int((last_id.decode() if isinstance(last_id, bytes) else str(last_id)).rpartition("-")[2])
        for seq, error in refused:
            if not isinstance(error, ResponseError) or seq > top:
                raise error

    def _on_cancel_flag(self, present: Any) -> None:
        if present:
            preempted = present in (PREEMPT, PREEMPT.encode())
            self.control.abort("preempted" if preempted else "client_cancelled")

    def _on_refresh(self, ok: Any) -> None:
        if ok:
            self.lock.refreshed = time.monotonic()
        else:
            self.control.abort("lock_lost")

    async def _run(self) -> None:
        while not self._closed:
            try:
                async with asyncio.timeout(PING_INTERVAL):
                    await self._wake.wait()
            except TimeoutError:
                self._pending.append('{"kind":"ping"}')
            self._wake.clear()
            if self._closed:
                return
            if not self._pending:  # a direct send() already took the batch
                continue
            try:
                await self.send()
            except RedisError as exc:
                self.control.abort("redis_error", str(exc))
                return

    async def close(self) -> None:
        self._closed = True
        self._wake.set()
        if self._task is not None:
            with contextlib.suppress(Exception):
                await self._task
        with contextlib.suppress(RedisError):
            await self.send(final=True)
