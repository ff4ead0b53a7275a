"""The GPU queue as a ModelBackend: each round is one RQ job, its tokens come back over a Redis stream.

The API side of agent.queue.keys. `stream_round` admits the round (429 past MAX_QUEUE_DEPTH), enqueues it on
the continuing-rounds queue (round > 1) or the new-rounds queue, then follows the job's event stream with
`XREAD BLOCK`, yielding events as the worker produces them. It fails fast and clearly when the worker dies
(its pings stop), when no worker is running, when Redis is down, or when the round waited past
QUEUE_TIMEOUT_SECONDS. Closing the generator (client gone) removes a queued job or stops a running one.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
import uuid
from collections.abc import AsyncIterator, Coroutine
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import redis.asyncio as aioredis
import structlog
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError

from agent.backends.base import ModelStatus, RoundDone, RoundEvent, RoundRequest, event_from_dict
from agent.context import RequestContext
from agent.errors import DependencyDown, QueueTimeout
from agent.metrics import QUEUE_WAIT, REJECTED
from agent.queue import admit, keys
from agent.queue.depth import DepthGauge, estimate_retry_after, queue_timeout, refusal, share_refusal
from agent.queue.guard import RoundSigner
from agent.queue.keys import error_from
from agent.queue.reader import RoundReader, WorkerHosts
from agent.queue.registry import WorkerRegistry, capacity
from agent.redisconn import connection_options, redacted, ride_through, unreachable
from agent.settings import Settings

BLOCK_MS = 1000  # XREAD BLOCK; the socket timeout below must exceed it
CHECK_EVERY = 1.0  # seconds between liveness checks of a waiting round
WORKER_LOST_AFTER = 4.0  # seconds without a ping from the worker holding the round
VANISHED_AFTER = 3.0  # a job gone from the queue without an `accepted` event: its worker died on pickup
JOB_MARGIN_S = 30  # RQ's job timeout: the round's own limits (slot wait, generation) plus this; a backstop

log = structlog.get_logger("agent.queue.client")


def queue_for(request: RoundRequest, continuing_first: bool = True) -> str:
    """Rounds of conversations under way (round > 1) go on the queue every worker reads first;
    client task rounds on the one read last."""
    if request.priority == "task":
        return keys.QUEUE_TASKS
    return keys.QUEUE_CONTINUING if continuing_first and request.round > 1 else keys.QUEUE_NEW


class WorkerLost(Exception):
    """The worker holding a round stopped answering (killed, crashed, or cut off from Redis)."""


def raise_if_cancelled() -> None:
    """Re-raise a cancellation the Redis client swallowed. redis-py's asyncio client sometimes returns normally
    from a blocking XREAD that was cancelled (measured with redis-py 8.1: 5 of 300 cancels): the round of a client
    gone while queued then ran anyway. The task still counts the request (Task.cancelling), so ask it."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


class Phase(StrEnum):
    """Where a followed round is: queued → accepted (a worker host claimed it and pings) → running (it holds a GPU
    slot and its model request is out)."""

    QUEUED = "queued"
    ACCEPTED = "accepted"
    RUNNING = "running"


@dataclass
class _Round:
    request: RoundRequest
    job_id: str
    context: RequestContext | None = None  # the request the round is of: who ran it is noted there, for its audit
    enqueued: float = 0.0  # monotonic
    phase: Phase = Phase.QUEUED
    queue_wait: float | None = None
    forwarded: bool = False  # an event reached the caller: a retry would repeat it
    finished: bool = False
    vanished: float | None = None


class QueueBackend:
    """ModelBackend that runs every round through the RQ queue and the agent-worker(s)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.where = redacted(settings.redis_url)
        self.continuing_first = True
        self.signer = RoundSigner(settings.round_signing_secret())  # unset: a start-up error, not a 500 per round
        # Each admitted round holds a connection only while its XREAD blocks: depth + running + margin.
        options = connection_options(settings)
        pool = aioredis.BlockingConnectionPool.from_url(
            settings.redis_url,
            **options,
            decode_responses=True,
            max_connections=settings.max_queue_depth + 32,
            timeout=5,
            socket_timeout=BLOCK_MS / 1000 + 4,
            socket_connect_timeout=1,
            retry=AsyncRetry(NoBackoff(), 1),
        )  # one retry for a stale connection, not redis-py's 10
        self.redis = aioredis.Redis(connection_pool=pool)
        self.workers = WorkerRegistry(self.redis, self.where)
        self.hosts = WorkerHosts(self.redis)
        self._background: set[asyncio.Task[None]] = set()
        self.depth = DepthGauge(self.redis, self._spawn)

    async def stream_round(
        self, request: RoundRequest, context: RequestContext | None = None
    ) -> AsyncIterator[RoundEvent]:
        retried = resubmitted = False
        while True:
            rnd = _Round(request, uuid.uuid4().hex, context)
            try:
                await self._enqueue(rnd, front=retried)
                async for event in self._follow(rnd):
                    yield event
                return
            except WorkerLost as exc:
                if retried or rnd.forwarded or request.priority == "task" or not await self._worker_coming(fresh=True):
                    raise DependencyDown(
                        f"agent-worker stopped mid-round ({exc}); the answer is incomplete. "
                        "Try again; see the agent-worker logs."
                    ) from exc
                log.warning("round_retried", job_id=rnd.job_id, reason=str(exc))
                retried = True
            except DependencyDown as exc:
                # Redis went away: once it is back (REDIS_RECONNECT_SECONDS), submit the round again, once. A model
                # round is idempotent; a round that already sent the caller tokens is not repeated.
                if resubmitted or rnd.forwarded or exc.__cause__ is None or not unreachable(exc.__cause__):
                    raise
                await self._redis_back(exc)
                log.warning("round_resubmitted", job_id=rnd.job_id, reason="redis_unreachable")
                resubmitted = True
            finally:
                if not rnd.finished:
                    await self._abandon(rnd)
                if request.priority == "task":
                    self._spawn(self._untrack(rnd.job_id))
                elif request.share:
                    self._spawn(self._unshare(request.share, rnd.job_id))

    async def _redis_back(self, failure: DependencyDown) -> None:
        """Wait for Redis to answer again, for REDIS_RECONNECT_SECONDS; else the round fails with `failure`."""
        try:
            await ride_through(self.redis.ping, self.settings.redis_reconnect_seconds, "queue")
        except RedisError as exc:
            raise failure from exc

    async def _enqueue(self, rnd: _Round, front: bool) -> None:
        try:
            workers = await self.workers.live()
            if not workers and not self.workers.restarting():
                REJECTED.labels("no_worker").inc()
                raise DependencyDown(self.workers.no_worker())
            rnd.enqueued = time.monotonic()
            admission = await self._push(rnd, front)
            if not admission.admitted:
                durations = [float(d) for d in await self.redis.lrange(keys.ROUND_TIMES, 0, -1)]
        except RedisError as exc:
            REJECTED.labels("redis_down").inc()
            raise self.workers.redis_down(exc) from exc
        if admission.preempted:
            log.info("task_rounds_preempted", count=admission.preempted)
        depth = admission.depth
        if not admission.admitted:
            wait = estimate_retry_after(durations, depth, self.settings.max_queue_depth, capacity(workers))
            if admission.over_share:
                REJECTED.labels("user_share").inc()
                raise share_refusal(self.settings.max_rounds_per_user, wait)
            if rnd.request.priority != "task":
                REJECTED.labels("queue_full").inc()
                self.depth.set(admission.waiting)  # the latest Redis saw: admissions may resume out of order
            raise refusal(rnd.request.priority == "task", depth, self.settings.max_queue_depth, wait)
        self.depth.set(admission.waiting)
        log.debug("round_enqueued", job_id=rnd.job_id, round=rnd.request.round, depth=depth)

    async def _push(self, rnd: _Round, front: bool) -> admit.Admission:
        """Save the job and admit it in one script (agent.queue.admit). A user round preempts the client task
        rounds under way in the same step (their tasks are answered locally); a task round joins them."""
        name = keys.QUEUE_CONTINUING if front else queue_for(rnd.request, self.continuing_first)
        settings = self.settings
        lifetime = math.ceil(settings.queue_timeout_seconds + settings.round_timeout_seconds) + JOB_MARGIN_S
        spec = admit.JobSpec(
            job_id=rnd.job_id,
            args=(admit.request_fields(rnd.request), time.time(), rnd.job_id),
            # the worker bounds the round itself (QUEUE_TIMEOUT_SECONDS waiting, ROUND_TIMEOUT_SECONDS generating)
            timeout=lifetime,
            ttl=math.ceil(settings.queue_timeout_seconds) + 60,
            claim_ttl=lifetime,
            description=f"round {rnd.request.round} of request {rnd.request.request_id}",  # never the prompt
        )
        limit = admit.limit(name, settings.max_queue_depth, retried=front)
        return await admit.push(self.redis, spec, name, limit, front, self.signer, self._share(rnd.request, front))

    def _share(self, request: RoundRequest, retried: bool) -> admit.Share:
        """The caller's fair share (MAX_ROUNDS_PER_USER): every user round of an identified caller counts; only a
        new question can be refused for it, never a round of a conversation under way or a retried one."""
        per_user = self.settings.max_rounds_per_user
        if not request.share or not per_user or request.priority == "task":
            return admit.Share(None, admit.NO_LIMIT, 0)
        new = request.round == 1 and not retried
        lifetime = math.ceil(self.settings.queue_timeout_seconds + self.settings.round_timeout_seconds) + JOB_MARGIN_S
        return admit.Share(keys.fair_key(request.share), per_user if new else admit.NO_LIMIT, lifetime * 1000)

    async def _follow(self, rnd: _Round) -> AsyncIterator[RoundEvent]:
        last_seen = checked = time.monotonic()
        try:
            stream = RoundReader(self.redis, rnd.job_id, self.hosts, rnd.context)
            while True:
                entries = await stream.read(count=512, block_ms=BLOCK_MS)
                raise_if_cancelled()
                now = time.monotonic()
                if stream.host is not None and rnd.phase is Phase.QUEUED:
                    rnd.phase = Phase.ACCEPTED  # claimed: its worker pings from now on
                    last_seen = now
                for data in entries:
                    last_seen = now
                    event = self._handle(rnd, data, now)
                    if event is not None:
                        yield event
                        if isinstance(event, RoundDone):
                            return
                if not entries or now - checked >= CHECK_EVERY:
                    checked = now
                    await self._check(rnd, now, last_seen)
                    raise_if_cancelled()
        except RedisError as exc:
            raise self.workers.redis_down(exc) from exc

    def _handle(self, rnd: _Round, data: dict[str, Any], now: float) -> RoundEvent | None:
        kind = data.get("kind")
        if kind == "accepted":
            rnd.phase = Phase.ACCEPTED
        elif kind == "started":
            rnd.phase, rnd.queue_wait = Phase.RUNNING, now - rnd.enqueued
            QUEUE_WAIT.observe(rnd.queue_wait)
            self.depth.sample_soon()
        elif kind == "error":
            rnd.finished = True
            raise error_from(data)
        elif kind != "ping":
            event = event_from_dict(data)
            rnd.forwarded = True
            if isinstance(event, RoundDone):
                rnd.finished = True
                return event
            return event
        return None

    async def _check(self, rnd: _Round, now: float, last_seen: float) -> None:
        waited = now - rnd.enqueued
        if (
            rnd.request.priority == "task"
            and rnd.phase is not Phase.RUNNING
            and waited > self.settings.client_task_wait_seconds
        ):
            raise QueueTimeout("the GPU stayed busy: the client task is answered without it")
        if rnd.phase is not Phase.RUNNING and waited > self.settings.queue_timeout_seconds:
            REJECTED.labels("queue_timeout").inc()
            raise queue_timeout(waited, self.settings.queue_timeout_seconds)
        if rnd.phase is not Phase.QUEUED:
            if now - last_seen > WORKER_LOST_AFTER:
                raise WorkerLost(f"no heartbeat for {now - last_seen:.1f} s")
            return
        pipe = self.redis.pipeline(transaction=False)
        for key in keys.RQ_QUEUE_KEYS:
            pipe.lpos(key, rnd.job_id)
        if not any(pos is not None for pos in await pipe.execute()):
            rnd.vanished = rnd.vanished or now
            if now - rnd.vanished > VANISHED_AFTER:
                raise WorkerLost("the job left the queue but its worker never reported")
        if not await self._worker_coming():
            raise DependencyDown(self.workers.no_worker())

    async def _worker_coming(self, fresh: bool = False) -> bool:
        """A worker is live, or one was a moment ago (WORKER_RESTART_GRACE): a round can still be run."""
        return bool(await self.workers.live(fresh=fresh)) or self.workers.restarting()

    async def _abandon(self, rnd: _Round) -> None:
        """Client gone or round failed: take the job off the queue, or tell its worker to stop."""
        task = self._spawn(self._cancel_job(rnd.job_id))
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.shield(task)

    async def _cancel_job(self, job_id: str) -> None:
        try:
            pipe = self.redis.pipeline(transaction=False)
            pipe.set(keys.cancel_key(job_id), "1", ex=keys.CANCEL_TTL)
            for key in keys.RQ_QUEUE_KEYS:
                pipe.lrem(key, 0, job_id)
            _, *removed = await pipe.execute()
            if any(removed):
                await self.redis.delete(keys.rq_job_key(job_id))
            log.info("round_cancelled", job_id=job_id, was_queued=any(removed))
        except RedisError as exc:
            log.warning("round_cancel_failed", job_id=job_id, error=str(exc))

    async def _unshare(self, share: str, job_id: str) -> None:
        """The round is over: it no longer counts in its caller's share (a lost removal lapses by itself)."""
        with contextlib.suppress(RedisError):
            await self.redis.zrem(keys.fair_key(share), job_id)

    async def _untrack(self, job_id: str) -> None:
        with contextlib.suppress(RedisError):
            await self.redis.srem(keys.TASK_ROUNDS, job_id)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    async def status(self) -> ModelStatus:
        return await self.workers.status()

    async def aclose(self) -> None:
        tasks = list(self._background)
        for task in tasks:
            task.cancel()
        if tasks:  # let them unwind before the pool closes, or one may still hold or open a connection after it
            # (seen as an unclosed socket in the next test once the depth sample ran a second after a start)
            await asyncio.wait(tasks, timeout=2)
        await self.redis.aclose()
        await self.redis.connection_pool.disconnect()
