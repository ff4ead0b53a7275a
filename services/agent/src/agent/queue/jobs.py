"""The GPU round as an RQ job: key names shared by API and worker, and the worker side of one round.

One job = one LLM round. The worker relays the round's events to the API through a per-job Redis
stream (`agent:round:<id>:events`, entry ids 0-1, 0-2, … so a re-sent XADD is refused, never doubled):

    accepted  the worker took the job (from then on it pings every PING_INTERVAL s, even while waiting)
    started   the per-GPU lock is held and the request goes to Ollama
    text / thinking / tool_calls / done   agent.backends.base events, as Ollama produces them
    error     an agent.errors class name and message; the API re-raises it
    ping      the worker is alive (the API treats silence as worker death)

A client that goes away sets `agent:round:<id>:cancel`; the worker checks it with every write and
closes the Ollama stream (Ollama stops generating on disconnect).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field
from typing import Any, cast

import httpx
import redis.asyncio as aioredis
import structlog
from redis.exceptions import RedisError
from rq.timeouts import JobTimeoutException

from agent.backends.base import RoundDone, RoundEvent, RoundRequest, event_to_dict
from agent.backends.ollama import stream_chat
from agent.errors import AgentError, DependencyDown, QueueTimeout, UpstreamError, UpstreamTimeout
from agent.metrics import GPU_BUSY, LLM_TOKENS, ROUND_DURATION, TIME_TO_FIRST_TOKEN
from agent.settings import Settings

QUEUE_CONTINUING = "agent-rounds-continuing"  # rounds > 1: read first by every worker
QUEUE_NEW = "agent-rounds-new"
QUEUE_ORDER = (QUEUE_CONTINUING, QUEUE_NEW)  # workers BLPOP these in this order: the priority
WORKERS_SET = "agent:workers"
ROUND_TIMES = "agent:round_times"  # recent GPU round durations, newest first (Retry-After estimate)
ROUND_TIMES_KEPT = 50

PING_INTERVAL = 0.5  # seconds of silence after which the worker writes a ping
STATUS_TTL = 5  # seconds a worker's status key outlives its last heartbeat
STREAM_TTL = 120  # seconds an event stream outlives its last write
CANCEL_TTL = 600
LOCK_TTL_MS = 5000  # a killed worker's GPU lock frees itself this fast
LOCK_REFRESH = 1.0
LOCK_POLL = 0.005  # only a second worker on the same GPU ever waits here

_REFRESH = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end return 0"
_RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"

log = structlog.get_logger("agent.queue.jobs")


def events_key(job_id: str) -> str:
    return f"agent:round:{job_id}:events"


def cancel_key(job_id: str) -> str:
    return f"agent:round:{job_id}:cancel"


def worker_status_key(worker_id: str) -> str:
    return f"agent:worker:{worker_id}:status"


def gpu_lock_key(gpu_id: str) -> str:
    return f"agent:gpu:{gpu_id}:lock"


@dataclass
class Runtime:
    """What a worker process lends its jobs: an event loop in a thread, and clients bound to it."""

    settings: Settings
    worker_id: str
    loop: asyncio.AbstractEventLoop
    redis: aioredis.Redis
    http: httpx.AsyncClient

    @property
    def ollama_url(self) -> str:
        return self.settings.ollama_url.rstrip("/")


_runtime: Runtime | None = None


def install_runtime(runtime: Runtime | None) -> None:
    global _runtime
    _runtime = runtime


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


def run_round(request: dict[str, Any], enqueued_at: float, job_id: str) -> dict[str, Any]:
    """RQ job: run one round on this worker's GPU. Arguments and result are plain JSON."""
    if _runtime is None:
        raise RuntimeError("run_round runs only inside agent-worker")
    rt = _runtime
    controls: list[RoundControl] = []
    future = asyncio.run_coroutine_threadsafe(
        execute_round(rt, job_id, RoundRequest.from_dict(request), enqueued_at, controls.append), rt.loop
    )
    try:
        return future.result()
    except BaseException as exc:  # RQ's job timeout (SIGALRM) or a cold shutdown: stop the round, re-raise
        reason = "job_timeout" if isinstance(exc, JobTimeoutException) else "worker_shutdown"
        if controls:
            rt.loop.call_soon_threadsafe(controls[0].abort, reason)
        with contextlib.suppress(BaseException):
            future.result(timeout=5)
        raise


async def execute_round(
    rt: Runtime,
    job_id: str,
    request: RoundRequest,
    enqueued_at: float,
    expose: Callable[[RoundControl], None] = lambda c: None,
) -> dict[str, Any]:
    """Accept, take the GPU lock, stream from Ollama into the event stream; never raises AgentError."""
    task = asyncio.current_task()
    assert task is not None
    control = RoundControl(task)
    expose(control)
    structlog.contextvars.bind_contextvars(request_id=request.request_id, job_id=job_id)
    lock = GpuLock(rt.redis, gpu_lock_key(rt.settings.gpu_id), rt.worker_id)
    writer = EventWriter(rt.redis, job_id, control, lock)
    outcome: dict[str, Any] = {"outcome": "error"}
    try:
        writer.put({"kind": "accepted", "worker": rt.worker_id})
        await writer.send(try_lock=True)  # one round trip: accepted, the cancel flag, a first try for the lock
        waited = time.time() - enqueued_at
        if waited > rt.settings.queue_timeout_seconds:
            raise QueueTimeout(_queue_timeout_message(rt.settings, waited))
        if not lock.held:
            await lock.acquire()
            waited = time.time() - enqueued_at
        writer.put({"kind": "started", "queue_wait_s": round(waited, 6)})
        log.info("round_started", model=request.model, round=request.round, queue_wait_s=round(waited, 4))
        outcome = await _generate(rt, request, writer, enqueued_at)
    except asyncio.CancelledError:
        if control.reason is None:
            raise
        task.uncancel()
        outcome = _aborted(control, writer, rt.settings)
    except AgentError as exc:
        writer.put(error_entry(exc))
        log.warning("round_failed", error=type(exc).__name__, detail=exc.message)
    except Exception as exc:
        writer.put(error_entry(UpstreamError(f"agent-worker failed: {type(exc).__name__}: {exc}")))
        log.exception("round_crashed")
    finally:
        control.finished = True
        await writer.close()  # last events, lock release and the round time: one round trip
        structlog.contextvars.unbind_contextvars("request_id", "job_id")
    return outcome


async def _generate(rt: Runtime, request: RoundRequest, writer: EventWriter, enqueued_at: float) -> dict[str, Any]:
    gpu = GPU_BUSY.labels(rt.settings.gpu_id)
    gpu.set(1)
    started = time.monotonic()
    done: RoundDone | None = None
    try:
        async with asyncio.timeout(rt.settings.round_timeout_seconds):
            stream = cast(
                AsyncGenerator[RoundEvent, None],
                stream_chat(rt.http, rt.ollama_url, request, rt.settings.holds_back_think(request.model)),
            )
            async with contextlib.aclosing(stream):
                async for event in stream:
                    if isinstance(event, RoundDone):
                        done = event
                    writer.put(event_to_dict(event), last=done is not None)
    except TimeoutError as exc:
        raise UpstreamTimeout(
            f"The model did not finish the round within ROUND_TIMEOUT_SECONDS={rt.settings.round_timeout_seconds:g}"
        ) from exc
    finally:
        gpu.set(0)
    gpu_seconds = time.monotonic() - started
    writer.round_time = gpu_seconds
    _record(request, done, enqueued_at)
    log.info(
        "round_finished",
        model=request.model,
        round=request.round,
        gpu_seconds=round(gpu_seconds, 4),
        completion_tokens=done.completion_tokens if done else 0,
    )
    return {"outcome": "done", "gpu_seconds": gpu_seconds}


def _record(request: RoundRequest, done: RoundDone | None, enqueued_at: float) -> None:
    ROUND_DURATION.labels(request.model, str(request.round)).observe(max(0.0, time.time() - enqueued_at))
    if done is not None:
        if done.time_to_first_token_s is not None:
            TIME_TO_FIRST_TOKEN.observe(done.time_to_first_token_s)
        LLM_TOKENS.labels(request.model, "prompt").inc(done.prompt_tokens)
        LLM_TOKENS.labels(request.model, "completion").inc(done.completion_tokens)


def _aborted(control: RoundControl, writer: EventWriter, settings: Settings) -> dict[str, Any]:
    log.info("round_aborted", reason=control.reason, detail=control.detail)
    if control.reason == "job_timeout":
        writer.put(
            error_entry(
                UpstreamTimeout(
                    f"The round exceeded its job timeout (ROUND_TIMEOUT_SECONDS={settings.round_timeout_seconds:g})"
                )
            )
        )
    elif control.reason == "worker_shutdown":
        writer.put(error_entry(DependencyDown("agent-worker was stopped mid-round; try again")))
    elif control.reason == "lock_lost":
        writer.put(
            error_entry(
                DependencyDown("agent-worker lost its GPU lock mid-round (stalled or Redis restarted); try again")
            )
        )
    return {"outcome": control.reason or "aborted"}


def _queue_timeout_message(settings: Settings, waited: float) -> str:
    return (
        f"The round waited {waited:.0f} s for the GPU, past QUEUE_TIMEOUT_SECONDS="
        f"{settings.queue_timeout_seconds:g}: the GPU is busy, try again later"
    )


def error_entry(exc: AgentError) -> dict[str, Any]:
    return {
        "kind": "error",
        "error": type(exc).__name__,
        "message": exc.message,
        "param": exc.param,
        "retry_after": exc.retry_after,
    }


class GpuLock:
    """`SET NX PX` on the GPU's key: one generation per GPU even with a second worker started by mistake.

    The EventWriter tries it, refreshes it while the round streams and releases it with the last events.
    """

    def __init__(self, redis: aioredis.Redis, key: str, token: str) -> None:
        self.redis, self.key, self.token = redis, key, token
        self.held = False
        self.refreshed = 0.0

    async def acquire(self) -> None:
        # The lock lives in Redis (shared with other workers), so there is no local Event to wait on.
        while not await self.redis.set(self.key, self.token, nx=True, px=LOCK_TTL_MS):  # noqa: ASYNC110
            await asyncio.sleep(LOCK_POLL)
        self.taken()

    def taken(self) -> None:
        self.held, self.refreshed = True, time.monotonic()

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
            checks: list[Callable[[Any], None]] = [self._on_cancel_flag]
            pipe.exists(cancel_key(self.job_id))
            if try_lock:
                pipe.set(self.lock.key, self.lock.token, nx=True, px=LOCK_TTL_MS)
                checks.append(lambda ok: self.lock.taken() if ok else None)
            elif final and self.lock.held:
                self.lock.held = False
                pipe.eval(_RELEASE, 1, self.lock.key, self.lock.token)
                checks.append(lambda _: None)
            elif self.lock.refresh_due():
                pipe.eval(_REFRESH, 1, self.lock.key, self.lock.token, LOCK_TTL_MS)
                checks.append(self._on_refresh)
            if final and self.round_time is not None:
                pipe.lpush(ROUND_TIMES, f"{self.round_time:.4f}")
                pipe.ltrim(ROUND_TIMES, 0, ROUND_TIMES_KEPT - 1)
            results = await pipe.execute(raise_on_error=False)
        for result in results:  # a re-sent batch (retry after a lost reply) is refused by id: that is fine
            if isinstance(result, Exception) and "equal or smaller" not in str(result):
                raise result
        for check, result in zip(checks, results[len(batch) + 1 :], strict=False):
            check(result)

    def _on_cancel_flag(self, present: Any) -> None:
        if present:
            self.control.abort("client_cancelled")

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
