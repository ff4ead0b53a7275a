"""The API's view of the agent-workers: which are alive (cached briefly), and their status for /readyz.

Each worker publishes a status key (agent.queue.keys.worker_status_key, expiring STATUS_TTL s after its
last heartbeat) and adds its id to WORKERS_SET; ids whose status key expired are pruned here.
"""

from __future__ import annotations

import json
import math
import time
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from agent.backends.base import ModelStatus
from agent.errors import DependencyDown
from agent.queue import keys
from agent.redisconn import fix_hint

WORKERS_CACHE = 1.0  # seconds a list of live workers is reused by the rounds being admitted
# s since this API last saw a live worker during which none is a restart, not an absence: rounds are admitted and
# wait for it (a killed agent-worker's status lapses 5 s after its last heartbeat and its successor's first comes
# ~8 s after the kill here), so a restart costs latency, not answers. An API that never saw one fails at once.
WORKER_RESTART_GRACE = 30.0


def capacity(workers: list[dict[str, Any]]) -> int:
    """Rounds the live backends run at once: the slots of each GPU (workers sharing a GPU_ID share its slots)."""
    slots: dict[str, int] = {}
    for worker in workers:
        gpu = str(worker.get("gpu_id"))
        slots[gpu] = max(slots.get(gpu, 1), int(worker.get("slots") or 1))
    return sum(slots.values())


class WorkerRegistry:
    """Reads the workers' status keys; builds the messages that say a worker or Redis is missing."""

    def __init__(self, redis: aioredis.Redis, where: str) -> None:
        self.redis, self.where = redis, where
        self._cache: tuple[float, list[dict[str, Any]]] = (-math.inf, [])
        self._seen_at = -math.inf  # monotonic: when a read last found a live worker

    async def live(self, fresh: bool = False) -> list[dict[str, Any]]:
        """Status of the live workers (their status keys expire STATUS_TTL s after their last heartbeat)."""
        at, cached = self._cache
        if not fresh and time.monotonic() - at < WORKERS_CACHE:
            return cached
        ids = sorted(str(i) for i in await self.redis.smembers(keys.WORKERS_SET))
        values = await self.redis.mget([keys.worker_status_key(i) for i in ids]) if ids else []
        alive = [json.loads(v) for v in values if v]
        dead = [i for i, v in zip(ids, values, strict=True) if not v]
        if dead:
            await self.redis.srem(keys.WORKERS_SET, *dead)
        self._cache = (time.monotonic(), alive)
        if alive:
            self._seen_at = time.monotonic()
        return alive

    def restarting(self) -> bool:
        """No worker is live, but one was within WORKER_RESTART_GRACE: its restart is waited for, not reported."""
        return time.monotonic() - self._seen_at <= WORKER_RESTART_GRACE

    async def status(self) -> ModelStatus:
        try:
            workers = await self.live(fresh=True)
        except RedisError as exc:
            return ModelStatus(False, detail=self.redis_down(exc).message)
        if not workers:
            return ModelStatus(False, detail=self.no_worker())
        reachable = [w for w in workers if w.get("ollama_reachable")]
        models = sorted({m for w in workers for m in w.get("models") or []})
        version = next((w["ollama_version"] for w in reachable if w.get("ollama_version")), None)
        detail = "; ".join(f"agent-worker on {w.get('gpu_id')} up: {w.get('detail')}" for w in workers)
        engines = sorted({str(w["engine"]) for w in reachable if w.get("engine")})
        scripted = any(w.get("scripted") for w in reachable)
        return ModelStatus(bool(reachable), models, version, detail, engine=", ".join(engines), scripted=scripted)

    def no_worker(self) -> str:
        return (
            f"no agent-worker is running (no worker heartbeat in Redis at {self.where}): start one "
            "(`docker compose up -d agent-worker`, or `agent-worker` on the GPU host)"
        )

    def redis_down(self, exc: Exception) -> DependencyDown:
        return DependencyDown(f"Redis unreachable at {self.where} ({type(exc).__name__}: {exc}). {fix_hint(exc)}")
