"""Worker side of one GPU round: the RQ job function and the round it runs on the worker's event loop.

One job = one LLM round. `run_round` (called by RQ in the worker's main thread) hands the round to the
worker's asyncio loop; `execute_round` accepts it, takes the per-GPU lock and streams Ollama's events into
the round's event stream (agent.queue.writer, entry kinds in agent.queue.events). A client that goes away
sets the round's cancel flag; the writer sees it with its next write and the round's task is cancelled,
which closes the Ollama stream (Ollama stops generating on disconnect).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import Any, cast

import httpx
import redis.asyncio as aioredis
import structlog

from agent.backends.base import RoundDone, RoundEvent, RoundRequest, event_to_dict
from agent.backends.engine import stream_engine
from agent.errors import AgentError, DependencyDown, QueueTimeout, UpstreamError, UpstreamTimeout
from agent.metrics import GPU_BUSY, LLM_TOKENS, ROUND_DURATION, TIME_TO_FIRST_TOKEN
from agent.queue.events import error_entry
from agent.queue.keys import gpu_lock_key
from agent.queue.rq_adapter import is_job_timeout
from agent.queue.writer import EventWriter, GpuLock, RoundControl
from agent.settings import Settings

log = structlog.get_logger("agent.queue.jobs")


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
        return self.settings.model_endpoint()


_runtime: Runtime | None = None


def install_runtime(runtime: Runtime | None) -> None:
    global _runtime
    _runtime = runtime


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
        reason = "job_timeout" if is_job_timeout(exc) else "worker_shutdown"
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
                stream_engine(rt.http, rt.settings, request),
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
    elif control.reason == "preempted":
        writer.put(error_entry(DependencyDown("client task round preempted by a user round")))
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
