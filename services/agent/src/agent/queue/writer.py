"""Worker side of a round's event stream: batched writes, pings, the cancel flag and the GPU's slot lock.

The worker relays a round's events to the API through a per-job Redis stream under its own host's prefix
(agent.queue.keys.events_key), with entry ids 0-1, 0-2, …, one redis-py pipeline per batch. This writer is the
stream's only writer: an append refused for its id is its own entry re-sent after a lost reply (found there as
sent, so never doubled) or someone else's, and then the round ends as intruded instead of going on under a
stranger's entries. The entry kinds are listed in agent.queue.keys. Every write also checks the cancel flag the
API sets when its client went away, and refreshes the round's GPU slot while the round streams; the last batch
releases it and records the round time.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import redis.asyncio as aioredis
import structlog
from redis.exceptions import RedisError

from agent.queue.keys import (
    LOCK_TTL_MS,
    PREEMPT,
    ROUND_TIMES,
    ROUND_TIMES_KEPT,
    STREAM_TTL,
    cancel_key,
)

log = structlog.get_logger("agent.queue.writer")

PING_INTERVAL = 0.5  # seconds of silence after which the worker writes a ping
# s between the starts of two batches while a round streams: the tokens that arrive meanwhile go together. Each
# batch is a Redis round trip here and a wake-up of the API's reader, and one in flight when a generation ends
# competed for the CPU with the next round's model request (measured: gap 3.2 -> 2.3 ms on 2 cores, with one
# batch per token of a 200 tokens/s fake). A token waits 10 ms at most; close() sends what waits at once.
BATCH_INTERVAL = 0.01
LOCK_REFRESH = 1.0
LOCK_POLL = 0.005  # only rounds of a second worker on the same GPU (or a killed one's slots) make a round wait

_REFRESH = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end return 0"
# KEYS: the slot keys. Takes the first free one; reply: its 1-based index, or 0 while all are held.
_TAKE = """
for i = 1, #KEYS do
  if redis.call('set', KEYS[i], ARGV[1], 'NX', 'PX', ARGV[2]) then return i end
end
return 0
"""
RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"


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

    At most WORKER_SLOTS rounds hold one at a time, whichever worker process runs them: the slot processes of
    one agent-worker, and those of a second agent-worker (another host) given the same GPU_ID. A round takes
    its slot before it asks the model, waiting here while other rounds hold them all; the EventWriter refreshes
    it while the round streams and releases it with the last events; a killed worker's slots expire after
    LOCK_TTL_MS. RQ has no per-resource concurrency limit (its 2.x workers run whatever they pop).
    """

    def __init__(self, redis: aioredis.Redis, keys: list[str], token: str) -> None:
        self.redis, self.keys, self.token = redis, keys, token
        self.key: str | None = None  # the slot held
        self.refreshed = time.monotonic()

    @property
    def held(self) -> bool:
        return self.key is not None

    async def acquire(self, cancel_key: str) -> str:
        """Take a free slot, or return the round's cancel flag as soon as it is set ('' once a slot is taken; a
        slot taken with the flag is released by the round's last write). One round trip (the flag's GET and the
        take, pipelined) when a slot is free, as it is unless rounds of another worker on this GPU hold them."""
        while True:
            pipe = self.redis.pipeline(transaction=False)
            pipe.get(cancel_key)
            pipe.eval(_TAKE, len(self.keys), *self.keys, self.token, LOCK_TTL_MS)
            flag, index = await pipe.execute()
            if index:
                self.key, self.refreshed = self.keys[int(index) - 1], time.monotonic()
            if flag:
                return flag.decode() if isinstance(flag, bytes) else str(flag)
            if index:
                return ""
            await asyncio.sleep(LOCK_POLL)  # the slots live in Redis, shared: no local Event to wait on

    def refresh_due(self) -> bool:
        return self.held and time.monotonic() - self.refreshed >= LOCK_REFRESH


@dataclass
class EventWriter:
    """Sends pending events in one batch of commands per round trip; pings, checks the cancel flag, minds the lock."""

    redis: aioredis.Redis
    job_id: str
    stream: str  # agent.queue.keys.events_key of this worker host
    control: RoundControl
    lock: GpuLock
    round_time: float | None = None  # recorded with the last batch (Retry-After estimates)
    _pending: list[str] = field(default_factory=list)
    _seq: int = 0
    _intruded: bool = False  # someone else appended to this stream: the last entries go under Redis's own ids
    _wake: asyncio.Event = field(default_factory=asyncio.Event)
    _closing: asyncio.Event = field(default_factory=asyncio.Event)  # set by close(): no background send after
    _send_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _task: asyncio.Task[None] | None = None

    def put(self, data: dict[str, Any], hold: bool = False) -> None:
        """Queue an event and have it sent; `hold` keeps it for the next send (the last event waits for close(),
        which sends it with the lock release; the first ones wait for flush())."""
        self._pending.append(json.dumps(data, separators=(",", ":")))
        if not hold:
            self.flush()

    def flush(self) -> None:
        """Send what is pending soon, in the background."""
        if self._closing.is_set():
            return
        self._wake.set()
        if self._task is None:
            self._task = asyncio.create_task(self._run())

    async def send(self, final: bool = False) -> None:
        """Write what is pending now (in order with the background sends) plus the checks that ride along."""
        async with self._send_lock:
            batch, self._pending = self._pending, []
            stream = self.stream
            pipe = self.redis.pipeline(transaction=False)  # one round trip: the batch and the checks riding along
            sent: list[tuple[str, str]] = []  # (entry id, data)
            for data in batch:
                self._seq += 1
                sent.append(("*" if self._intruded else f"0-{self._seq}", data))
                pipe.xadd(stream, {"e": data}, id=sent[-1][0])
            pipe.expire(stream, STREAM_TTL)
            checks: list[Callable[[Any], object]] = [self.on_cancel_flag]
            pipe.get(cancel_key(self.job_id))
            if final and self.lock.key is not None:
                pipe.eval(RELEASE, 1, self.lock.key, self.lock.token)
                self.lock.key = None
                checks.append(lambda _: None)
            elif self.lock.refresh_due() and self.lock.key is not None:
                pipe.eval(_REFRESH, 1, self.lock.key, self.lock.token, LOCK_TTL_MS)
                checks.append(self._on_refresh)
            if final and self.round_time is not None:
                pipe.lpush(ROUND_TIMES, f"{self.round_time:.4f}")
                pipe.ltrim(ROUND_TIMES, 0, ROUND_TIMES_KEPT - 1)
            results = await pipe.execute(raise_on_error=False)
            await self._raise_errors(results, sent)
        for check, result in zip(checks, results[len(batch) + 1 :], strict=False):
            check(result)

    async def _raise_errors(self, results: list[Any], sent: list[tuple[str, str]]) -> None:
        """Raise the first failed command. An append refused for its id is this writer's own entry when redis-py
        re-sent the batch after a lost reply (the entry at that id is exactly what was sent); anything else there is
        another writer's: the round is aborted as intruded, logged at error level."""
        for result in results[len(sent) :]:
            if isinstance(result, Exception):
                raise result
        refused = [(entry, r) for entry, r in zip(sent, results, strict=False) if isinstance(r, Exception)]
        if not refused:
            return
        for _entry, error in refused:
            if "equal or smaller" not in str(error):
                raise error
        for (entry_id, data), _error in refused:
            found = cast(list[tuple[Any, dict[Any, Any]]], await self.redis.xrange(self.stream, entry_id, entry_id))
            if not found or _field(found[0][1], "e") != data:
                break
        else:
            return  # every refused entry is there as sent: a re-sent batch, not doubled
        if not self._intruded:
            self._intruded = True
            log.error("round_stream_intruded", job_id=self.job_id, stream=self.stream, refused=len(refused))
            self.control.abort("stream_intruded")

    def on_cancel_flag(self, present: Any) -> None:
        if present:
            preempted = present in (PREEMPT, PREEMPT.encode())
            self.control.abort("preempted" if preempted else "client_cancelled")

    def _on_refresh(self, ok: Any) -> None:
        if ok:
            self.lock.refreshed = time.monotonic()
        else:
            self.control.abort("lock_lost")

    async def _run(self) -> None:
        while not self._closing.is_set():
            try:
                async with asyncio.timeout(PING_INTERVAL):
                    await self._wake.wait()
            except TimeoutError:
                self._pending.append('{"kind":"ping"}')
            self._wake.clear()
            if self._closing.is_set():
                return
            if not self._pending:  # a direct send() already took the batch
                continue
            began = time.monotonic()
            try:
                await self.send()
            except RedisError as exc:
                self.control.abort("redis_error", str(exc))
                return
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(began + BATCH_INTERVAL - time.monotonic()):
                    await self._closing.wait()

    async def close(self) -> None:
        """Send the last events and the round time, and release the slot."""
        self._closing.set()  # also ends the rest between two batches
        self._wake.set()
        if self._task is not None:
            with contextlib.suppress(Exception):
                await self._task
        with contextlib.suppress(RedisError):
            await self.send(final=True)


def _field(fields: dict[Any, Any], name: str) -> str | None:
    """A stream entry's field, from a client with or without decode_responses."""
    value = fields.get(name, fields.get(name.encode()))
    return value.decode() if isinstance(value, bytes) else value
