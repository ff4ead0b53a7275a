"""The job function of every round (`run_round`) and the per-process runtime it runs rounds on.

Each slot process of agent-worker is an RQ SimpleWorker (agent.queue.slot): RQ pops the round's job, the
continuing rounds first, and calls `run_round` on its main thread. The round itself runs on the process's
event loop, a second thread that owns the async Redis and model clients (agent.queue.running), and the main
thread waits for it; RQ's job timeout and a cold shutdown raise there, and the round is aborted so that it
still writes its error and frees its slot before RQ records the job as failed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import threading
from typing import Any

import httpx
import redis.asyncio as aioredis
import uvloop
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import ExponentialBackoff

from agent.queue.running import Runtime, abort_round, execute_round
from agent.redisconn import connection_options
from agent.settings import Settings, get_settings

_runtime: list[Runtime] = []  # this process's, built by agent.queue.slot before RQ starts (or by the first round)


def start_runtime(settings: Settings, worker_id: str) -> Runtime:
    """Start the event-loop thread and build the clients on it. The loop is uvloop's: a round is a chain of
    socket reads and writes and callbacks on it, and with uvloop the gap between two generations measured
    4.4-4.6 ms against 4.7-5.1 ms (three interleaved pairs)."""
    loop = uvloop.new_event_loop()
    threading.Thread(target=loop.run_forever, name="agent-worker-loop", daemon=True).start()

    async def build() -> Runtime:
        timeout = httpx.Timeout(settings.round_timeout_seconds, connect=5.0)
        http = httpx.AsyncClient(timeout=timeout, headers=settings.model_headers())
        # One quick retry survives a pooled connection that a Redis restart closed; no 10-retry backoff.
        redis = aioredis.Redis.from_url(
            settings.redis_url,
            **connection_options(settings),
            socket_timeout=5,
            socket_connect_timeout=2,
            retry=AsyncRetry(ExponentialBackoff(cap=0.2, base=0.05), 1),
        )
        return Runtime(settings, worker_id, loop, redis, http)

    rt = asyncio.run_coroutine_threadsafe(build(), loop).result()
    _runtime[:] = [rt]
    return rt


def stop_runtime(rt: Runtime) -> None:
    """Close the clients and stop the loop (a slot process that is exiting)."""

    async def close() -> None:
        await rt.http.aclose()
        await rt.redis.aclose()

    with contextlib.suppress(Exception):
        asyncio.run_coroutine_threadsafe(close(), rt.loop).result(timeout=5)
    rt.loop.call_soon_threadsafe(rt.loop.stop)
    _runtime.clear()


def run_round(request: dict[str, Any], enqueued_at: float, job_id: str) -> dict[str, Any]:
    """The function every round's RQ job names (agent.queue.rq_adapter.JOB_FUNCTION): runs the round on this
    process's event loop and waits for it. An exception a signal raises here (RQ's job timeout, a cold
    shutdown) aborts the round, which writes its error and frees its slot before the exception goes on to RQ."""
    if not _runtime:  # a plain `rq worker` on these queues: its rounds still take the backend's slots
        settings = get_settings()
        start_runtime(settings, f"{settings.gpu_id}.{socket.gethostname()}.{os.getpid()}")
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
