"""Worker side of one GPU round: the round the dispatcher claimed, run as a task on the worker's event loop.

The dispatcher (agent.queue.dispatch) claims a round with a slot of the backend's counted lock already held
(unless other workers' rounds hold them all) and starts `execute_round`, which sends the model request at once;
the `accepted` and `started` events follow in the background (agent.queue.writer, entry kinds in
agent.queue.events). When the model's stream is done the round hands its slot back to the dispatcher, which
passes it straight to the next round, while this round's last events are written. A client that goes away sets
the round's cancel flag; the claim or the writer's next write sees it and the round's task is cancelled, which
closes the model's stream (Ollama stops generating on disconnect).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, cast

import httpx
import redis.asyncio as aioredis
import structlog

from agent.backends.base import RoundDone, RoundEvent, RoundRequest, event_to_dict
from agent.backends.engine import stream_engine
from agent.backends.ollama import record_round, round_timeout_message
from agent.errors import AgentError, DependencyDown, QueueTimeout, UpstreamError, UpstreamTimeout
from agent.metrics import GPU_BUSY, GPU_ROUNDS
from agent.queue.dispatch import Claim, Dispatcher
from agent.queue.events import error_entry
from agent.queue.keys import gpu_slot_keys, gpu_waiting_key
from agent.queue.rq_adapter import job_args
from agent.queue.writer import EventWriter, GpuLock, RoundControl
from agent.settings import Settings

log = structlog.get_logger("agent.queue.jobs")
FLUSH_AFTER = 0.05  # s: a round's first events wait at most this long for its model request to be written

# The round whose task is running: the model client's request hook (mark_sent) tells it when its request is written.
SENDING: ContextVar[Callable[[], None] | None] = ContextVar("sending", default=None)
_SENT = "http11.send_request_body.complete"


async def mark_sent(request: httpx.Request) -> None:
    """httpx request hook of the worker's model client. It runs in the task of the round sending the request, so
    it can give the request an httpcore trace callback that tells that round how far its request got."""
    tell = SENDING.get()
    if tell is None:
        return

    async def trace(event: str, info: dict[str, Any]) -> None:
        if event == _SENT:
            tell()

    request.extensions["trace"] = trace


@dataclass
class Runtime:
    """What a worker process lends its rounds: an event loop in a thread, and clients bound to it."""

    settings: Settings
    worker_id: str
    loop: asyncio.AbstractEventLoop
    redis: aioredis.Redis
    http: httpx.AsyncClient
    dispatcher: Dispatcher
    rounds: dict[str, RoundControl] = field(default_factory=dict)  # job id → round under way (event loop only)
    generating: int = 0  # rounds streaming from the model now (GPU_BUSY, GPU_ROUNDS)

    @property
    def ollama_url(self) -> str:
        return self.settings.model_endpoint()


def run_round(request: dict[str, Any], enqueued_at: float, job_id: str) -> dict[str, Any]:
    """The function every round's RQ job names (agent.queue.rq_adapter.JOB_FUNCTION). agent-worker claims its
    rounds itself and never calls it; a plain `rq worker` started on the agent's queues would, and must fail
    the job rather than run a round outside the GPU lock."""
    raise RuntimeError(
        f"round {job_id} was taken by a plain RQ worker: local-agent rounds run only in agent-worker; "
        "stop the other worker reading the agent-rounds-* queues"
    )


def _once(action: Callable[[], None]) -> Callable[[], None]:
    done = False

    def once() -> None:
        nonlocal done
        if not done:
            done = True
            action()

    return once


def stop_rounds(rt: Runtime, reason: str) -> None:
    """Abort every round under way (a cold shutdown); each writes its error before it frees its slot."""
    for control in list(rt.rounds.values()):
        rt.loop.call_soon_threadsafe(control.abort, reason)


async def execute_round(rt: Runtime, claim: Claim) -> dict[str, Any]:
    """Start the model request, stream its events into the event stream; never raises AgentError."""
    task = asyncio.current_task()
    assert task is not None
    job_id = claim.job_id
    control = rt.rounds[job_id] = RoundControl(task)
    structlog.contextvars.bind_contextvars(job_id=job_id)
    settings = rt.settings
    slots = gpu_slot_keys(settings.gpu_id, settings.worker_slots)
    lock = GpuLock(rt.redis, slots, claim.token, gpu_waiting_key(settings.gpu_id), held=claim.slot)
    writer = EventWriter(rt.redis, job_id, control, lock)
    finished = False

    async def finish() -> None:
        """Once: claim the next round into this one's slot, then the last write (agent.queue.dispatch)."""
        nonlocal finished
        control.finished = True  # from here on an abort must not cancel the hand-over
        if not finished:
            finished = True
            await rt.dispatcher.finish(writer.lock.hand_over, writer.close, claim.behind)

    def sent() -> None:
        claim.sent.set()
        writer.flush()

    SENDING.set(sent)
    outcome: dict[str, Any] = {"outcome": "error"}
    try:
        # Held until the model request is written (or FLUSH_AFTER): it goes out before these writes.
        writer.put({"kind": "accepted", "worker": rt.worker_id}, hold=True)
        rt.loop.call_later(FLUSH_AFTER, writer.flush)
        writer.on_cancel_flag(claim.cancel)
        if control.reason is not None:
            await asyncio.sleep(0)  # a round cancelled while it was queued stops here, before the model hears of it
        request_dict, enqueued_at, _ = job_args(job_id, claim.job)
        request = RoundRequest.from_dict(request_dict)
        structlog.contextvars.bind_contextvars(request_id=request.request_id)
        waited = await _wait_for_slot(settings, lock, enqueued_at)
        writer.put({"kind": "started", "queue_wait_s": round(waited, 6)}, hold=True)
        log.info(
            "round_started",
            model=request.model,
            round=request.round,
            queue_wait_s=round(waited, 4),
        )
        outcome = await _generate(rt, request, writer, enqueued_at, finish)
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
        sent()
        await finish()  # unless the model's last event did it already
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


async def _generate(
    rt: Runtime,
    request: RoundRequest,
    writer: EventWriter,
    enqueued_at: float,
    finish: Callable[[], Awaitable[None]],
) -> dict[str, Any]:
    """Stream the round from the model; at its last event the slot moves on to the next round (`finish`) before
    this round's last write, metrics and logs."""
    _generating(rt, +1)
    idle = _once(lambda: _generating(rt, -1))  # at the last event: the next round may start before this one ends
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
                        idle()
                        writer.put(event_to_dict(event), hold=True)
                        writer.round_time = time.monotonic() - started
                        await finish()
                    else:
                        writer.put(event_to_dict(event))
    except TimeoutError as exc:
        raise UpstreamTimeout(round_timeout_message(rt.settings.round_timeout_seconds)) from exc
    finally:
        idle()
    gpu_seconds = writer.round_time or time.monotonic() - started
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
