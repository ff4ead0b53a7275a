"""The worker's dispatcher against a real Redis: what one claim takes, how a slot passes from round to round.

The claim script is the whole hand-over of a round from the queues to a worker, so its rules are pinned here
one by one; tests/integration/test_queue_*.py run the same rules through real agent-worker processes.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from typing import Any, cast

import httpx
import pytest
import redis
import redis.asyncio as aioredis

from agent.backends.base import RoundRequest
from agent.queue import admit, keys, rq_adapter
from agent.queue.dispatch import Claim, Dispatcher
from agent.queue.jobs import SENDING, Runtime, execute_round, mark_sent, run_round
from agent.queue.writer import EventWriter, GpuLock, RoundControl
from agent.settings import Settings
from tests.fakes.control import serve_in_loop
from tests.fakes.fake_ollama import FakeState
from tests.integration import queue_fixtures
from tests.integration.queue_fixtures import RedisServer

pytestmark = pytest.mark.integration
queue_redis = queue_fixtures.queue_redis

GPU = "gpu-test"
SLOT = keys.gpu_slot_keys(GPU, 1)[0]
NEW = keys.rq_queue_key(keys.QUEUE_NEW)


@pytest.fixture
def sync(queue_redis: RedisServer) -> Iterator[redis.Redis]:
    queue_redis.client().flushall()
    conn = redis.Redis(port=queue_redis.port)
    yield conn
    conn.close()


@pytest.fixture
async def conn(queue_redis: RedisServer, sync: redis.Redis) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis(port=queue_redis.port)  # bytes replies, as agent-worker's client
    yield client
    await client.aclose()


async def push(sync: redis.Redis, queue: str, text: str, enqueued_at: float = 1.5) -> str:
    """Queue a round as the API does (RQ job hash + admitting push, on an asyncio client); returns its job id."""
    request = RoundRequest("qwen3:4b", [{"role": "user", "content": text}], None, {}, request_id=text)
    spec = admit.JobSpec(f"job-{text}", (request.to_dict(), enqueued_at, f"job-{text}"), 60, 600, f"round of {text}")
    client = aioredis.Redis(port=sync.connection_pool.connection_kwargs["port"])
    try:
        admission = await admit.push(client, spec, queue, 100, False)
    finally:
        await client.aclose()
    assert admission.admitted
    return spec.job_id


def dispatcher(conn: aioredis.Redis, slots: int = 1, started: list[Claim] | None = None) -> Dispatcher:
    async def start(claim: Claim) -> None:
        if started is not None:
            started.append(claim)

    return Dispatcher(conn, "worker-a", GPU, slots, start)


def text_of(claim: Claim) -> str:
    request, enqueued_at, job_id = rq_adapter.job_args(claim.job_id, claim.job)
    assert (enqueued_at, job_id) == (1.5, claim.job_id)
    return str(request["messages"][0]["content"])


async def test_a_claim_takes_the_first_queued_round_in_priority_order_with_a_slot_and_its_cancel_flag(
    sync: redis.Redis, conn: aioredis.Redis
) -> None:
    await push(sync, keys.QUEUE_TASKS, "title")
    await push(sync, keys.QUEUE_NEW, "new")
    cont = await push(sync, keys.QUEUE_CONTINUING, "continuing")
    sync.set(keys.cancel_key(cont), "1")
    claim = await dispatcher(conn).claim()
    assert claim is not None
    assert (claim.job_id, text_of(claim), claim.slot, claim.cancel, claim.behind) == (cont, "continuing", SLOT, "1", 2)
    assert sync.get(SLOT) == f"worker-a:{cont}".encode()  # the slot's token names the worker and the round
    assert not sync.exists(keys.rq_job_key(cont))  # the hash went with the claim; the events stream is the record
    second, third = await dispatcher(conn).claim(), await dispatcher(conn).claim()
    assert second is not None and third is not None
    assert (text_of(second), second.slot, second.cancel) == ("new", "", "")  # the one slot is taken
    assert text_of(third) == "title"
    assert await dispatcher(conn).claim() is None


async def test_a_job_whose_hash_expired_while_queued_is_skipped(sync: redis.Redis, conn: aioredis.Redis) -> None:
    sync.rpush(keys.rq_queue_key(keys.QUEUE_NEW), "expired-job")
    await push(sync, keys.QUEUE_NEW, "alive")
    claim = await dispatcher(conn).claim()
    assert claim is not None and text_of(claim) == "alive"
    assert sync.llen(keys.rq_queue_key(keys.QUEUE_NEW)) == 0


async def test_a_handed_over_slot_goes_to_the_next_round_and_is_freed_when_none_waits(
    sync: redis.Redis, conn: aioredis.Redis
) -> None:
    job = await push(sync, keys.QUEUE_NEW, "next")
    sync.set(SLOT, "worker-a:previous")
    d = dispatcher(conn)
    claim = d._claimed(await conn.eval(*d.claim_command(handed=(SLOT, "worker-a:previous"))))
    assert claim is not None and (claim.job_id, claim.slot) == (job, SLOT)
    assert sync.get(SLOT) == f"worker-a:{job}".encode()
    assert d._claimed(await conn.eval(*d.claim_command(handed=(SLOT, f"worker-a:{job}")))) is None
    assert not sync.exists(SLOT)  # nothing queued: the slot is free for any worker


async def test_a_slot_no_longer_held_is_not_handed_over(sync: redis.Redis, conn: aioredis.Redis) -> None:
    await push(sync, keys.QUEUE_NEW, "next")
    sync.set(SLOT, "worker-b:theirs")  # ours expired (a stalled worker) and another worker's round took it
    d = dispatcher(conn)
    claim = d._claimed(await conn.eval(*d.claim_command(handed=(SLOT, "worker-a:previous"))))
    assert claim is not None and claim.slot == ""  # the round waits for a slot like any other
    assert sync.get(SLOT) == b"worker-b:theirs"


async def test_a_round_waiting_on_another_worker_gets_the_slot_before_this_workers_next_round(
    sync: redis.Redis, conn: aioredis.Redis
) -> None:
    job = await push(sync, keys.QUEUE_NEW, "next")
    sync.set(SLOT, "worker-a:previous")
    waiting = GpuLock(conn, [SLOT], "worker-b:theirs", keys.gpu_waiting_key(GPU))
    acquiring = asyncio.create_task(waiting.acquire())
    await asyncio.sleep(0.05)
    assert sync.exists(keys.gpu_waiting_key(GPU))  # the waiting round marked its wait
    d = dispatcher(conn)
    assert d._claimed(await conn.eval(*d.claim_command(handed=(SLOT, "worker-a:previous")))) is None
    await asyncio.wait_for(acquiring, 5)
    assert sync.get(SLOT) == b"worker-b:theirs"
    assert not sync.exists(keys.gpu_waiting_key(GPU))  # no one waits any more
    assert sync.lrange(keys.rq_queue_key(keys.QUEUE_NEW), 0, -1) == [job.encode()]  # still queued


async def test_the_dispatcher_claims_only_for_free_slots_and_passes_a_finished_rounds_slot_on(
    sync: redis.Redis, conn: aioredis.Redis
) -> None:
    jobs = [await push(sync, keys.QUEUE_NEW, f"r{i}") for i in range(4)]
    started: list[Claim] = []
    d = dispatcher(conn, slots=2, started=started)
    d.begin()
    await wait_for(lambda: len(started) == 2)
    await asyncio.sleep(0.1)
    assert len(started) == 2  # two slots, two rounds: the others stay queued for any worker
    assert sync.llen(keys.rq_queue_key(keys.QUEUE_NEW)) == 2
    first = started[0]
    await finish(d, writer_for(conn, first), first.behind)
    await wait_for(lambda: len(started) == 3)
    assert started[2].slot == first.slot  # the finished round's slot, handed straight over
    assert sync.get(first.slot) == started[2].token.encode()
    await finish(d, writer_for(conn, started[1]), started[1].behind)
    await wait_for(lambda: len(started) == 4)
    for claim in started[2:]:
        await finish(d, writer_for(conn, claim), claim.behind)
    assert not any(sync.exists(k) for k in keys.gpu_slot_keys(GPU, 2))  # nothing queued: both slots free
    assert [c.job_id for c in started] == jobs
    await d.drain()
    assert d.free == 2


async def test_with_rounds_queued_the_next_model_request_goes_out_before_the_last_events(
    sync: redis.Redis, conn: aioredis.Redis
) -> None:
    await push(sync, keys.QUEUE_NEW, "first")
    await push(sync, keys.QUEUE_NEW, "second")
    seen: list[int] = []

    async def start(claim: Claim) -> None:  # the next round: its request is "written" after a look at the stream
        assert first is not None
        seen.append(await conn.xlen(keys.events_key(first.job_id)))
        claim.sent.set()

    d = Dispatcher(conn, "worker-a", GPU, 1, start)
    first = await d.claim()
    assert first is not None and first.behind == 1
    d.free = 0  # the claim above took the one slot
    writer = writer_for(conn, first)
    writer.put({"kind": "done"}, hold=True)
    await finish(d, writer, first.behind)
    assert seen == [0]  # the finished round's last event was not written yet when the next one started
    assert await conn.xlen(keys.events_key(first.job_id)) == 1


async def test_burst_mode_stops_claiming_once_the_queues_are_empty(sync: redis.Redis, conn: aioredis.Redis) -> None:
    await push(sync, keys.QUEUE_NEW, "only")
    started: list[Claim] = []
    d = dispatcher(conn, slots=2, started=started)
    d.burst = True
    d.begin()
    await asyncio.wait_for(asyncio.to_thread(d.finished.wait, 5), 6)
    assert [text_of(c) for c in started] == ["only"] and d.stopping


async def test_a_dispatcher_that_fails_says_so_and_lets_the_worker_stop(
    sync: redis.Redis, conn: aioredis.Redis
) -> None:
    await push(sync, keys.QUEUE_NEW, "doomed")

    def broken(claim: Claim) -> Coroutine[Any, Any, object]:
        raise ZeroDivisionError("a bug")

    d = Dispatcher(conn, "worker-a", GPU, 1, broken)
    d.begin()
    await asyncio.wait_for(asyncio.to_thread(d.finished.wait, 5), 6)
    assert isinstance(d.failed, ZeroDivisionError)  # agent-worker's RQ thread returns, and it exits with 1


async def test_the_model_client_tells_a_round_when_its_request_is_written() -> None:
    calls: list[str] = []
    async with serve_in_loop() as url, httpx.AsyncClient(event_hooks={"request": [mark_sent]}) as http:
        await http.get(f"{url}/api/version")  # no round in this task: nothing to tell
        SENDING.set(lambda: calls.append("sent"))
        response = await http.get(f"{url}/api/version")
        assert response.status_code == 200
        assert calls == ["sent"]  # once, when its request was written


def test_a_plain_rq_worker_taking_a_round_fails_it_rather_than_run_it_outside_the_gpu_lock() -> None:
    with pytest.raises(RuntimeError, match="only in agent-worker"):
        run_round({}, 0.0, "job-x")


async def test_a_claimed_round_streams_its_events_and_frees_its_slot_when_nothing_is_queued(
    queue_redis: RedisServer, sync: redis.Redis, conn: aioredis.Redis
) -> None:
    state = FakeState()
    state.configure({"default": {"content": "one two three"}, "token_delay": 0.01})
    async with serve_in_loop(state) as url, httpx.AsyncClient(event_hooks={"request": [mark_sent]}) as http:
        settings = Settings(
            redis_url=f"redis://127.0.0.1:{queue_redis.port}/0",
            ollama_url=url,
            ollama_model="qwen3:4b",
            gpu_id=GPU,
            think_holdback_models="",
        )

        async def never(claim: Claim) -> None:
            raise AssertionError("nothing is queued behind the round")

        d = Dispatcher(conn, "worker-a", GPU, 1, never)
        rt = Runtime(settings, "worker-a", asyncio.get_running_loop(), conn, http, d)
        job = await push(sync, keys.QUEUE_NEW, "only", time.time())
        claim = await d.claim()
        assert claim is not None and claim.job_id == job and claim.slot == SLOT
        d.free = 0
        outcome = await asyncio.wait_for(execute_round(rt, claim), 10)
        events = cast(list[tuple[bytes, dict[bytes, bytes]]], await conn.xrange(keys.events_key(job)))
        kinds = [json.loads(e[b"e"])["kind"] for _, e in events]
        assert outcome["outcome"] == "done" and state.requests[-1]["outcome"] == "completed"
        assert kinds[:2] == ["accepted", "started"] and kinds[-1] == "done" and "text" in kinds
        assert not sync.exists(SLOT) and d.free == 1  # nothing queued: the slot is freed
        assert rt.rounds == {}


async def finish(d: Dispatcher, writer: EventWriter, behind: int) -> None:
    """What a round's end does (agent.queue.jobs.execute_round)."""
    await d.finish(writer.lock.hand_over, writer.close, behind)


def writer_for(conn: aioredis.Redis, claim: Claim) -> EventWriter:
    task = asyncio.current_task()
    assert task is not None
    lock = GpuLock(conn, keys.gpu_slot_keys(GPU, 2), claim.token, keys.gpu_waiting_key(GPU), held=claim.slot)
    return EventWriter(conn, claim.job_id, RoundControl(task), lock)


async def wait_for(condition: Callable[[], bool], within: float = 5.0) -> None:
    """Poll state the dispatcher changes on this event loop (so the loop must keep running meanwhile)."""
    async with asyncio.timeout(within):
        while not condition():  # noqa: ASYNC110 - no event to wait on: the state is the dispatcher's
            await asyncio.sleep(0.01)
