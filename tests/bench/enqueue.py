"""bench-queue, section 0: what enqueueing a round of a 15 KB conversation costs the API.

Timed from the API deciding to enqueue (QueueBackend._push: the job built, saved and admitted) to Redis's reply,
on the API's own asyncio client: idle (one round at a time, nothing else on the loop) and loaded (8 clients
running whole rounds through the worker at once, so each enqueue shares the loop with other rounds' streams).
Beside it, interleaved, RQ's own enqueue of the same job (`Queue.enqueue_job` on RQ's sync client: its Job
object, its pipeline), the cost the API paid before it wrote the job itself. The target: 1 ms at 15 KB.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

from redis import Redis
from rq import Queue
from rq.serializers import JSONSerializer

from agent.backends.base import RoundDone, RoundRequest
from agent.queue import admit, keys, rq_adapter
from agent.queue.client import QueueBackend, _Round
from tests.bench.stats import summary_ms

TARGET_MS = 1.0
SIZE = 15 * 1024


def conversation(size: int = SIZE) -> RoundRequest:
    """A conversation of about `size` bytes of JSON (Turkish text, tool schemas), as a round 2 carries."""
    tool = {
        "type": "function",
        "function": {
            "name": "musteri_islemleri",
            "description": "Bir müşterinin son işlemlerini ve bakiyesini getirir (tarih, tutar, para birimi).",
            "parameters": {"type": "object", "properties": {"customer": {"type": "string"}}},
        },
    }
    messages: list[dict[str, Any]] = [{"role": "system", "content": "Şirket içi analiz asistanısın. " * 10}]
    i = 0
    while len(json.dumps({"m": messages, "t": [tool] * 6}, ensure_ascii=False).encode()) < size:
        i += 1
        messages.append({"role": "user", "content": f"C{1000 + i} müşterisinin {i}. çeyrek işlemleri neler?"})
        messages.append({"role": "assistant", "content": f"C{1000 + i} için {i * 7} işlem: toplam ₺{i * 1234},50."})
    return RoundRequest("qwen3:4b", messages, [tool] * 6, {"num_ctx": 8192}, request_id="bench-enqueue", round=2)


def rq_enqueue(conn: Redis) -> Callable[[RoundRequest, str], None]:
    """RQ's own path for the same job: Queue.create_job + enqueue_job, RQ's pipeline on its sync client."""
    queue = Queue(keys.QUEUE_NEW, connection=conn, serializer=JSONSerializer)

    def enqueue(request: RoundRequest, job_id: str) -> None:
        job = queue.create_job(
            rq_adapter.JOB_FUNCTION,
            args=(request.to_dict(), time.time(), job_id),
            job_id=job_id,
            timeout=60,
            result_ttl=rq_adapter.RESULT_TTL,
            failure_ttl=rq_adapter.FAILURE_TTL,
            ttl=660,
            description="bench",
        )
        queue.enqueue_job(job)

    return enqueue


def timed_pushes(backend: QueueBackend) -> list[float]:
    """Wrap the backend's enqueue so every call's duration is noted."""
    times: list[float] = []
    push = backend._push

    async def timed(rnd: _Round, front: bool) -> admit.Admission:
        started = time.perf_counter()
        try:
            return await push(rnd, front)
        finally:
            times.append(time.perf_counter() - started)

    backend._push = timed  # type: ignore[method-assign]
    return times


async def idle(backend: QueueBackend, redis_url: str, request: RoundRequest, n: int) -> tuple[list[float], list[float]]:
    ours, theirs = [], []
    conn = Redis.from_url(redis_url)
    enqueue = rq_enqueue(conn)
    try:
        for i in range(n + 50):
            started = time.perf_counter()
            await backend._push(_Round(request, f"enq-a{i}"), False)
            mid = time.perf_counter()
            enqueue(request, f"enq-r{i}")
            if i >= 50:  # warm-up discarded
                ours.append(mid - started)
                theirs.append(time.perf_counter() - mid)
            conn.delete(keys.rq_queue_key(keys.QUEUE_NEW), keys.rq_job_key(f"enq-a{i}"), keys.rq_job_key(f"enq-r{i}"))
    finally:
        conn.close()
    return ours, theirs


async def loaded(backend: QueueBackend, request: RoundRequest, rounds: int) -> list[float]:
    """8 clients running whole rounds at once; the enqueue of each round timed."""
    times = timed_pushes(backend)
    clients = asyncio.Semaphore(8)

    async def one(i: int) -> None:
        async with clients:
            async for event in backend.stream_round(request):
                if isinstance(event, RoundDone):
                    return

    await asyncio.gather(*(one(i) for i in range(rounds)))
    del backend._push  # the class's own again
    return times


async def run(make: Callable[[], QueueBackend], redis_url: str, n: int, warm: Callable[[], Awaitable[None]]) -> None:
    request = conversation()
    size = len(json.dumps(request.to_dict(), ensure_ascii=False).encode())
    backend = make()
    try:
        await warm()
        ours, theirs = await idle(backend, redis_url, request, n)
        under_load = await loaded(backend, request, max(100, n // 2))
    finally:
        await backend.aclose()
    print(f"0. enqueue of a {size / 1024:.1f} KB round (decided to enqueue -> Redis's reply), one private redis-server")
    print(f"   agent, idle                 {summary_ms(ours)}")
    print(f"   RQ's own enqueue, idle      {summary_ms(theirs)}   (Queue.enqueue_job, interleaved)")
    print(f"   agent, 8 rounds streaming   {summary_ms(under_load)}")
    median = statistics.median(ours)
    print(f"   enqueue at 15 KB / target: {median * 1000 / TARGET_MS:4.2f} (median {median * 1000:.2f} ms vs 1 ms; "
          f"target <= 1.00)   RQ's own / agent: {statistics.median(theirs) / median:4.1f}x")  # fmt: skip
