"""Worker side of one GPU round: the RQ job function and the round it runs on the worker's event loop.

One job = one LLM round. `run_round` (called by RQ in the worker's main thread, on a slot the RQ thread took
before dequeuing: agent.queue.slots) hands the round to the worker's asyncio loop and returns at once, so RQ's
own bookkeeping of the job overlaps the generation instead of sitting between two. `execute_round` accepts the
round, takes a slot of the backend's counted lock and streams the model's events into the round's event stream
(agent.queue.writer, entry kinds in agent.queue.events); when it ends it frees the worker's slot. A client
that goes away sets the round's cancel flag; the writer sees it with its next write and the round's task is
cancelled, which closes the model's stream (Ollama stops generating on disconnect).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncGenerator, Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, cast

import httpx
import redis.asyncio as aioredis
import structlog

from agent.backends.base import RoundDone, RoundEvent, RoundRequest, event_to_dict
from agent.backends.engine import stream_engine
from agent.backends.ollama import record_round
from agent.errors import AgentError, DependencyDown, QueueTimeout, UpstreamError, UpstreamTimeout
from agent.metrics import GPU_BUSY, GPU_ROUNDS
from agent.queue.events import error_entry
from agent.queue.keys import gpu_slot_keys
from agent.queue.slots import Slots
from agent.queue.writer import EventWriter, GpuLock, RoundControl
from agent.settings import Settings

log = structlog.get_logger("agent.queue.jobs")
BOOKKEEPING_AFTER = 0.1  # seconds into a round (or its end) before the RQ thread does its own bookkeeping


@dataclass
class Runtime:
    """What a worker process lends its jobs: an event loop in a thread, and clients bound to it."""

    settings: Settings
    worker_id: str
    loop: asyncio.AbstractEventLoop
    redis: aioredis.Redis
    http: httpx.AsyncClient
    slots: Slots
    rounds: dict[str, RoundControl] = field(default_factory=dict)  # job id → round under way (event loop only)
    futures: set[Future[dict[str, Any]]] = field(default_factory=set)  # the rounds a shutdown waits for
    generating: int = 0  # rounds streaming from the model now (GPU_BUSY, GPU_ROUNDS)

    @property
    def ollama_url(self) -> str:
        return self.settings.model_endpoint()


_runtime: Runtime | None = None


def install_runtime(runtime: Runtime | None) -> None:
    global _runtime
    _runtime = runtime


def run_round(request: dict[str, Any], enqueued_at: float, job_id: str) -> dict[str, Any]:
    """RQ job: start one round on this worker's backend and return; the round frees its slot when it ends."""
    if _runtime is None:
        raise RuntimeError("run_round runs only inside agent-worker")
    rt = _runtime
    release, ended = _once(rt.slots.claim()), threading.Event()
    future = asyncio.run_coroutine_threadsafe(
        execute_round(rt, job_id, RoundRequest.from_dict(request), enqueued_at, release, ended.set), rt.loop
    )
    rt.futures.add(future)

    def finished(done: Future[dict[str, Any]]) -> None:
        rt.futures.discard(done)
        release()  # the round crashed before it could
        ended.set()

    future.add_done_callback(finished)
    # RQ's bookkeeping of this job (a few round trips of Python work) waits while the round starts and, for
    # a short round, until it ends: the two threads do not take turns at the GIL on the round's critical path.
    # A long round has it done during its generation, so it never sits between two generations.
    ended.wait(BOOKKEEPING_AFTER)
    return {"outcome": "started"}


def _once(release: Callable[[], None]) -> Callable[[], None]:
    released = False

    def once() -> None:
        nonlocal released
        if not released:
            released = True
            release()

    return once


def stop_rounds(rt: Runtime, reason: str) -> None:
    """Abort every round under way (a cold shutdown); each writes its error before it frees its slot."""
    for control in list(rt.rounds.values()):
        rt.loop.call_soon_threadsafe(control.abort, reason)


async def execute_round(
    rt: Runtime,
    job_id: str,
    request: RoundRequest,
    enqueued_at: float,
    release: Callable[[], None] = lambda: None,
    ended: Callable[[], None] = lambda: None,
) -> dict[str, Any]:
    """Accept, take a GPU slot, stream from the model into the event stream; never raises AgentError.

    `release` frees the worker's slot as soon as the model is done, so the RQ thread reads the next job while
    this round's last events are still being written."""
    task = asyncio.current_task()
    assert task is not None
    control = rt.rounds[job_id] = RoundControl(task)
    structlog.contextvars.bind_contextvars(request_id=request.request_id, job_id=job_id)
    slots = gpu_slot_keys(rt.settings.gpu_id, rt.settings.worker_slots)
    lock = GpuLock(rt.redis, slots, f"{rt.worker_id}:{job_id}")
    writer = EventWriter(rt.redis, job_id, control, lock)
    outcome: dict[str, Any] = {"outcome": "error"}
    try:
        writer.put({"kind": "accepted", "worker": rt.worker_id})
        await writer.send(try_lock=True)  # one round trip: accepted, the cancel flag, a first try for a slot
        waited = await _wait_for_slot(rt.settings, lock, enqueued_at)
        writer.put({"kind": "started", "queue_wait_s": round(waited, 6)})
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
        control.finished = True
        release()
        ended()
        await writer.close()  # last events, slot release and the round time: one round trip
        del rt.rounds[job_id]
        structlog.contextvars.unbind_contextvars("request_id", "job_id")
    return outcome


async def _wait_for_slot(settings: Settings, lock: GpuLock, enqueued_at: float) -> float:
    """Wait for a slot of the backend (held by another worker on the same GPU) within QUEUE_TIMEOUT_SECONDS;
    return the round's whole wait."""
    waited = time.time() - enqueued_at
    if waited > settings.queue_timeout_seconds:
        raise QueueTimeout(_queue_timeout_message(settings, waited))
    if lock.held:
        return waited
    try:
        async with asyncio.timeout(settings.queue_timeout_seconds - waited):
            await lock.acquire()
    except TimeoutError as exc:
        raise QueueTimeout(_queue_timeout_message(settings, time.time() - enqueued_at)) from exc
    return time.time() - enqueued_at


async def _generate(rt: Runtime, request: RoundRequest, writer: EventWriter, enqueued_at: float) -> dict[str, Any]:
    _generating(rt, +1)
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
        _generating(rt, -1)
    gpu_seconds = time.monotonic() - started
    writer.round_time = gpu_seconds
    record_round(request, done, time.time() - enqueued_at)
    log.info(
        "round_finished",
        model=request.model,
        round=request.round,
        gpu_seconds=round(gpu_seconds, 4),
        completion_tokens=done.completion_tokens if done else 0,
    )
    return {"outcome": "done", "gpu_seconds": gpu_seconds}


def _generating(rt: Runtime, change: int) -> None:
    """GPU_BUSY stays 0/1 (busy while any round generates: its mean is the busy fraction); GPU_ROUNDS counts."""
    rt.generating += change
    GPU_BUSY.labels(rt.settings.gpu_id).set(1 if rt.generating else 0)
    GPU_ROUNDS.labels(rt.settings.gpu_id).set(rt.generating)


def _aborted(control: RoundControl, writer: EventWriter) -> dict[str, Any]:
    log.info("round_aborted", reason=control.reason, detail=control.detail)
    if control.reason == "worker_shutdown":
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
