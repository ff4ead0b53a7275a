"""The job function of every round (`run_round`) and what it runs on: a slot process's runtime and one round.

Each slot process of agent-worker is an RQ SimpleWorker (agent.queue.worker): RQ pops the round's job, the
continuing rounds first, and calls `run_round` on its main thread. The round itself runs on the process's event
loop, a second thread that owns the async Redis client and the model backend, and the main thread waits for it;
RQ's job timeout and a cold shutdown raise there, and the round is aborted (`abort_round`) so that it still
writes its error and frees its slot before RQ records the job as failed.

`execute_round` takes a slot of the backend's counted lock (reading the round's cancel flag in the same round
trip), streams the round through the direct backend (agent.backends.engine.direct_backend: the same deadline,
ROUND_TIMEOUT_SECONDS, and the same model metrics as direct mode) and relays its events to the round's stream
(agent.queue.writer, entry kinds in agent.queue.keys); `accepted` and `started` go out once the model request
is written (the request's own httpcore trace callback, `sent_trace`; FLUSH_AFTER at most). A client that goes
away sets the cancel flag; the writer's next write sees it and the round's task is cancelled, which closes the
model's stream (Ollama stops generating on disconnect).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio as aioredis
import structlog
import uvloop
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import ExponentialBackoff

from agent.backends.base import RoundDone, RoundRequest, event_to_dict
from agent.backends.engine import direct_backend
from agent.backends.ollama import OllamaBackend
from agent.backends.stream import Trace
from agent.errors import AgentError, DependencyDown, RoundIntruded, UpstreamError
from agent.metrics import GPU_BUSY, GPU_ROUNDS
from agent.queue.depth import queue_timeout
from agent.queue.keys import cancel_key, error_entry, events_key, gpu_slot_keys
from agent.queue.writer import EventWriter, GpuLock, RoundControl
from agent.redisconn import connection_options
from agent.settings import Settings, get_settings

log = structlog.get_logger("agent.queue.jobs")
FLUSH_AFTER = 0.05  # s: a round's first events wait at most this long for its model request to be written

_SENT = "http11.send_request_body.complete"


def sent_trace(tell: Callable[[], None]) -> Trace:
    """The httpcore trace callback of one round's model request (httpx's `trace` request extension): `tell` the
    round once the request is written."""

    async def trace(event: str, info: dict[str, Any]) -> None:
        if event == _SENT:
            tell()

    return trace


@dataclass
class Runtime:
    """What a slot process lends its rounds: an event loop in a thread, and the clients bound to it."""

    settings: Settings
    worker_id: str
    loop: asyncio.AbstractEventLoop
    redis: aioredis.Redis
    backend: OllamaBackend  # the model server's (either protocol): its deadline and metrics are the rounds'
    rounds: dict[str, RoundControl] = field(default_factory=dict)  # job id → round under way (event loop only)
    aborted: dict[str, str] = field(default_factory=dict)  # job id → why, for an abort that came before its start
    generating: int = 0  # rounds streaming from the model now (GPU_BUSY, GPU_ROUNDS)


def _once(action: Callable[[], None]) -> Callable[[], None]:
    done = False

    def once() -> None:
        nonlocal done
        if not done:
            done = True
            action()

    return once


def abort_round(rt: Runtime, job_id: str, reason: str) -> None:
    """On the event loop: stop the round (it writes its error before it frees its slot)."""
    control = rt.rounds.get(job_id)
    if control is None:
        rt.aborted[job_id] = reason
    else:
        control.abort(reason)


async def execute_round(rt: Runtime, job_id: str, request_dict: dict[str, Any], enqueued_at: float) -> dict[str, Any]:
    """Take a slot, start the model request, stream its events into the event stream; never raises AgentError."""
    task = asyncio.current_task()
    assert task is not None
    control = rt.rounds[job_id] = RoundControl(task)
    structlog.contextvars.bind_contextvars(job_id=job_id)
    settings = rt.settings
    host = settings.worker_host()
    lock = GpuLock(rt.redis, gpu_slot_keys(host, settings.gpu_id, settings.worker_slots), f"{rt.worker_id}:{job_id}")
    writer = EventWriter(rt.redis, job_id, events_key(host, job_id), control, lock)
    outcome: dict[str, Any] = {"outcome": "error"}
    try:
        # Held until the model request is written (or FLUSH_AFTER): it goes out before these writes.
        writer.put({"kind": "accepted", "worker": rt.worker_id}, hold=True)
        rt.loop.call_later(FLUSH_AFTER, writer.flush)
        if job_id in rt.aborted:
            control.abort(rt.aborted.pop(job_id))
            await asyncio.sleep(0)
        request = RoundRequest.from_dict(request_dict)
        structlog.contextvars.bind_contextvars(request_id=request.request_id)
        waited = await _wait_for_slot(settings, lock, writer, enqueued_at)
        writer.put({"kind": "started", "queue_wait_s": round(waited, 6)}, hold=True)
        log.info("round_started", model=request.model, round=request.round, queue_wait_s=round(waited, 4))
        outcome = await _generate(rt, request, writer, enqueued_at)
    except asyncio.CancelledError:
        if control.reason is None:
            raise
        task.uncancel()
        outcome = _aborted(control, writer)
    except AgentError as exc:
        writer.put(error_entry(exc))
        log.warning("round_failed", error=type(exc).__name__, detail=exc.message)
    except Exception as exc:
        writer.put(error_entry(UpstreamError(f"agent-worker failed: {type(exc).__name__}: {exc}")))
        log.exception("round_crashed")
    finally:
        control.finished = True  # from here on an abort must not cancel the last write
        await writer.close()  # the last events, the round time and the slot's release: one round trip
        del rt.rounds[job_id]
        rt.aborted.pop(job_id, None)
        structlog.contextvars.unbind_contextvars("request_id", "job_id")
    return outcome


async def _wait_for_slot(settings: Settings, lock: GpuLock, writer: EventWriter, enqueued_at: float) -> float:
    """Take a slot of the backend within QUEUE_TIMEOUT_SECONDS (rounds of another worker on the same GPU may hold
    them all), unless the API cancelled the round meanwhile; return the round's whole wait."""
    waited = time.time() - enqueued_at
    if waited > settings.queue_timeout_seconds:
        raise queue_timeout(waited, settings.queue_timeout_seconds)
    try:
        async with asyncio.timeout(settings.queue_timeout_seconds - waited):
            flag = await lock.acquire(cancel_key(writer.job_id))
    except TimeoutError as exc:
        raise queue_timeout(time.time() - enqueued_at, settings.queue_timeout_seconds) from exc
    if flag:
        writer.on_cancel_flag(flag)
        await asyncio.sleep(0)  # the round's task is cancelled here: the model never hears of it
    return time.time() - enqueued_at


async def _generate(rt: Runtime, request: RoundRequest, writer: EventWriter, enqueued_at: float) -> dict[str, Any]:
    """Stream the round from the model; its last event waits for close(), which sends it with the slot's release."""
    _generating(rt, +1)
    idle = _once(lambda: _generating(rt, -1))  # at the last event: the GPU is idle before the last write
    started = time.monotonic()
    done: RoundDone | None = None
    try:
        waited = time.time() - enqueued_at  # counted in the round's duration (enqueue to last token)
        stream = rt.backend.stream_round(request, trace=sent_trace(writer.flush), waited=waited)
        async with contextlib.aclosing(stream):  # type: ignore[type-var]
            async for event in stream:
                if isinstance(event, RoundDone):
                    done = event
                    idle()
                    writer.put(event_to_dict(event), hold=True)
                    writer.round_time = time.monotonic() - started
                else:
                    writer.put(event_to_dict(event))
    finally:
        idle()
    gpu_seconds = writer.round_time or time.monotonic() - started
    log.info(
        "round_finished",
        model=request.model,
        round=request.round,
        gpu_seconds=round(gpu_seconds, 4),
        completion_tokens=done.completion_tokens if done else 0,
    )
    return {"outcome": "done", "gpu_seconds": gpu_seconds}


def _generating(rt: Runtime, change: int) -> None:
    """Per slot process: GPU_BUSY 0/1 and GPU_ROUNDS; agent-worker's /metrics shows their max and sum over its
    slot processes (agent.metrics: multiprocess modes), so busy is 1 while any slot generates."""
    rt.generating += change
    GPU_BUSY.labels(rt.settings.gpu_id).set(1 if rt.generating else 0)
    GPU_ROUNDS.labels(rt.settings.gpu_id).set(rt.generating)


_ABORTED: dict[str, AgentError] = {
    "worker_shutdown": DependencyDown("agent-worker was stopped mid-round; try again"),
    "preempted": DependencyDown("client task round preempted by a user round"),
    "lock_lost": DependencyDown("agent-worker lost its GPU lock mid-round (stalled or Redis restarted); try again"),
    "job_timeout": DependencyDown(
        "agent-worker's round passed its RQ job timeout (the model stream stalled); try again"
    ),
    "stream_intruded": RoundIntruded("another writer appended to this worker host's event stream of the round"),
}


def _aborted(control: RoundControl, writer: EventWriter) -> dict[str, Any]:
    log.info("round_aborted", reason=control.reason, detail=control.detail)
    error = _ABORTED.get(control.reason or "")
    if error is not None:
        writer.put(error_entry(error))
    return {"outcome": control.reason or "aborted"}


def worker_id(settings: Settings) -> str:
    """Unique per process, so a restart never waits for a dead worker's name to expire (RQ's --name trap)."""
    return f"{settings.gpu_id}.{socket.gethostname()}.{os.getpid()}.{uuid.uuid4().hex[:6]}"


_runtime: list[Runtime] = []  # this process's, built by its slot process before RQ starts (or by the first round)


def start_runtime(settings: Settings, name: str) -> Runtime:
    """Start the event-loop thread and build the clients on it. The loop is uvloop's: a round is a chain of
    socket reads and writes and callbacks on it, and with uvloop the gap between two generations measured
    4.4-4.6 ms against 4.7-5.1 ms (three interleaved pairs)."""
    loop = uvloop.new_event_loop()
    threading.Thread(target=loop.run_forever, name="agent-worker-loop", daemon=True).start()

    async def build() -> Runtime:
        # One quick retry survives a pooled connection that a Redis restart closed; no 10-retry backoff.
        redis = aioredis.Redis.from_url(
            settings.redis_url,
            **connection_options(settings),
            socket_timeout=5,
            socket_connect_timeout=2,
            retry=AsyncRetry(ExponentialBackoff(cap=0.2, base=0.05), 1),
        )
        return Runtime(settings, name, loop, redis, direct_backend(settings))

    rt = asyncio.run_coroutine_threadsafe(build(), loop).result()
    _generating(rt, 0)  # this process's GPU gauges start at 0
    _runtime[:] = [rt]
    return rt


def stop_runtime(rt: Runtime) -> None:
    """Close the clients and stop the loop (a slot process that is exiting)."""

    async def close() -> None:
        await rt.backend.aclose()
        await rt.redis.aclose()

    with contextlib.suppress(Exception):
        asyncio.run_coroutine_threadsafe(close(), rt.loop).result(timeout=5)
    rt.loop.call_soon_threadsafe(rt.loop.stop)
    _runtime.clear()


def run_round(request: dict[str, Any], enqueued_at: float, job_id: str) -> dict[str, Any]:
    """The function every round's RQ job names (agent.queue.guard.JOB_FUNCTION): runs the round on this
    process's event loop and waits for it. An exception a signal raises here (RQ's job timeout, a cold
    shutdown) aborts the round, which writes its error and frees its slot before the exception goes on to RQ."""
    if not _runtime:  # a plain `rq worker` on these queues: its rounds still take the backend's slots
        settings = get_settings()
        start_runtime(settings, worker_id(settings))
    rt = _runtime[0]
    future = asyncio.run_coroutine_threadsafe(execute_round(rt, job_id, request, enqueued_at), rt.loop)
    try:
        while True:
            with contextlib.suppress(TimeoutError):
                return future.result(timeout=1.0)  # short waits: a signal's exception interrupts them at once
    except BaseException as exc:
        reason = "worker_shutdown" if isinstance(exc, SystemExit | KeyboardInterrupt) else "job_timeout"
        rt.loop.call_soon_threadsafe(abort_round, rt, job_id, reason)
        with contextlib.suppress(Exception):
            future.result(timeout=5.0)
        raise
