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
from agent.queue import dispatch, keys, rq_adapter
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
    spec = rq_adapter.JobSpec(
        f"job-{text}", (request.to_dict(), enqueued_at, f"job-{text}"), 60, 600, f"round of {text}"
    )
    client = aioredis.Redis(port=sync.connection_pool.connection_kwargs["port"])
    try:
        admission = await rq_adapter.push(client, rq_adapter.admitting_queues(sync, 100)[queue, True], spec, False)
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
    await d.finish(writer_for(conn, first), first.behind)
    await wait_for(lambda: len(started) == 3)
    assert started[2].slot == first.slot  # the finished round's slot, handed straight over
    assert sync.get(first.slot) == started[2].token.encode()
    await d.finish(writer_for(conn, started[1]), started[1].behind)
    await wait_for(lambda: len(started) == 4)
    for claim in started[2:]:
        await d.finish(writer_for(conn, claim), claim.behind)
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
    await d.finish(writer, first.behind)
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
        SENDING.set(calls.append)
        response = await http.get(f"{url}/api/version")
        assert response.status_code == 200
        assert calls == ["sent", "answered"]  # its request written, then the answer begun


def test_a_plain_rq_worker_taking_a_round_fails_it_rather_than_run_it_outside_the_gpu_lock() -> None:
    with pytest.raises(RuntimeError, match="only in agent-worker"):
        run_round({}, 0.0, "job-x")


# The lookahead: a one-slot worker that is alone starts the round at the head of the queues as soon as its
# round ends, and takes it off the queue only then (agent.queue.dispatch, _PEEK and _CONFIRM).


def publish(sync: redis.Redis, worker: str) -> None:
    """What a worker's heartbeat does (agent.queue.worker.StatusReporter)."""
    sync.set(keys.worker_status_key(worker), "{}", ex=keys.STATUS_TTL)
    sync.sadd(keys.WORKERS_SET, worker)


async def peek(conn: aioredis.Redis, d: Dispatcher) -> str | None:
    ahead = d.lookahead()
    assert ahead is not None
    reply = await conn.eval(*ahead.command()[1:])
    return reply.decode() if reply else None


async def test_a_round_peeks_at_the_head_of_the_queues_only_while_its_worker_is_alone(
    sync: redis.Redis, conn: aioredis.Redis
) -> None:
    d = dispatcher(conn)
    await push(sync, keys.QUEUE_TASKS, "title")
    await push(sync, keys.QUEUE_NEW, "new")
    cont = await push(sync, keys.QUEUE_CONTINUING, "continuing")
    assert await peek(conn, d) is None  # this worker has not published its status yet: it may not be alone
    publish(sync, "worker-a")
    assert await peek(conn, d) == cont  # priority order
    sync.set(keys.gpu_waiting_key(GPU), "1")
    assert await peek(conn, d) is None  # a round of another worker waits for this backend's slot
    sync.delete(keys.gpu_waiting_key(GPU))
    sync.sadd(keys.WORKERS_SET, "worker-gone")  # a worker killed a while ago: its status key expired
    assert await peek(conn, d) == cont
    publish(sync, "worker-b")
    assert await peek(conn, d) is None  # another live worker could take the head first
    assert dispatcher(conn, slots=2).lookahead() is None  # its own rounds would race each other
    assert sync.llen(keys.rq_queue_key(keys.QUEUE_CONTINUING)) == 1  # a peek takes nothing


async def test_the_lookahead_reads_the_peeked_job_once_and_is_spent_when_taken(
    sync: redis.Redis, conn: aioredis.Redis
) -> None:
    job = await push(sync, keys.QUEUE_NEW, "next")
    ahead = dispatcher(conn).lookahead()
    assert ahead is not None
    ahead.seen(job.encode())
    await wait_for(lambda: ahead.job is not None)
    taken = ahead.take()
    assert taken is not None and (taken.job_id, text_of(taken)) == (job, "next")
    assert taken.args is not None and taken.args[0]["messages"][0]["content"] == "next"  # read ahead of time
    assert ahead.take() is None  # spent
    ahead.seen(b"job-gone")  # its hash expired: nothing to start
    await asyncio.sleep(0.05)
    assert ahead.take() is None
    ahead.seen(job.encode())
    ahead.seen(None)  # the queues emptied (or the worker is no longer alone) before the read came back
    await asyncio.sleep(0.05)
    assert ahead.take() is None


async def ended_round(
    sync: redis.Redis, conn: aioredis.Redis, meanwhile: Callable[[str], object]
) -> tuple[Dispatcher, Claim, str]:
    """ending_round, then `meanwhile(second's job id)` just before its end; returns the dispatcher, the one round
    it started (its model request "written" at once) and second's job id."""
    started: list[Claim] = []

    async def start(claim: Claim) -> None:
        started.append(claim)
        claim.sent.set()

    d, first, writer, second = await ending_round(sync, conn, start)
    meanwhile(second)
    await d.finish(writer, first.behind, writer.ahead)
    (claim,) = started
    return d, claim, second


async def ending_round(
    sync: redis.Redis, conn: aioredis.Redis, start: Callable[[Claim], Coroutine[Any, Any, object]]
) -> tuple[Dispatcher, Claim, EventWriter, str]:
    """A one-slot worker alone with one round claimed and generating, 'second' and 'third' queued behind it and
    'second' read by the round's lookahead. Returns the dispatcher, the round, its writer and second's job id."""
    publish(sync, "worker-a")
    await push(sync, keys.QUEUE_NEW, "first")
    second = await push(sync, keys.QUEUE_NEW, "second")
    await push(sync, keys.QUEUE_NEW, "third")
    d = Dispatcher(conn, "worker-a", GPU, 1, start)
    first = await d.claim()
    assert first is not None
    d.free = 0
    writer = writer_for(conn, first)
    writer.ahead = d.lookahead()
    writer.put({"kind": "token"})
    await writer.send()  # a batch of the round's events: its peek sees 'second' at the head
    assert writer.ahead is not None
    await wait_for(lambda: writer.ahead is not None and writer.ahead.job is not None)
    writer.put({"kind": "done"}, hold=True)
    return d, first, writer, second


async def test_at_a_rounds_end_the_peeked_round_starts_before_any_claim_and_is_confirmed_once_its_model_answers(
    sync: redis.Redis, conn: aioredis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dispatch, "ANSWER_WAIT", 10.0)  # so that only the answer can end the wait
    seen: list[object] = []

    async def start(claim: Claim) -> None:
        assert claim.confirmed is not None
        seen.append((text_of(claim), claim.confirmed.done(), sync.get(SLOT), sync.lrange(NEW, 0, -1)))
        seen.append(await conn.xlen(keys.events_key(first.job_id)))
        claim.sent.set()  # "its model request is written"
        await asyncio.sleep(0.05)  # the model server parses it
        seen.append((claim.confirmed.done(), await conn.xlen(keys.events_key(first.job_id))))
        claim.answered.set()  # "the model server's answer began"
        seen.append(await asyncio.shield(claim.confirmed))

    d, first, writer, second = await ending_round(sync, conn, start)
    queued = sync.lrange(NEW, 0, -1)
    await d.finish(writer, first.behind, writer.ahead)
    await wait_for(lambda: len(seen) == 4)
    # started with no claim made: still queued, the slot still the finished round's, its last event not yet sent;
    # once its request was written, still nothing until the model server answered
    assert seen == [("second", False, f"worker-a:{first.job_id}".encode(), queued), 1, (False, 1), True]
    assert sync.get(SLOT) == f"worker-a:{second}".encode()  # confirmed: the slot passed on, re-tokened
    assert not sync.exists(keys.rq_job_key(second))
    assert [text_of_id(sync, j) for j in sync.lrange(NEW, 0, -1)] == ["third"]
    assert await conn.xlen(keys.events_key(first.job_id)) == 2  # the round's last events went out after
    await d.drain()


async def test_a_confirmed_round_learns_its_cancel_flag_and_the_rounds_behind_it(
    sync: redis.Redis, conn: aioredis.Redis
) -> None:
    d, claim, second = await ended_round(sync, conn, lambda job: sync.set(keys.cancel_key(job), "1"))  # client left
    assert claim.confirmed is not None and claim.confirmed.result() is True
    assert (claim.job_id, claim.cancel, claim.behind, claim.slot) == (second, "1", 1, SLOT)
    await d.drain()


async def test_a_peeked_round_another_worker_took_is_closed_before_the_next_round_is_claimed(
    sync: redis.Redis, conn: aioredis.Redis
) -> None:
    order: list[str] = []

    async def start(claim: Claim) -> None:
        order.append(f"start {text_of(claim)}")
        claim.sent.set()
        if claim.confirmed is not None and not await asyncio.shield(claim.confirmed):
            await asyncio.sleep(0.05)  # closing its model request
            order.append(f"closed {text_of(claim)}")

    d, first, writer, second = await ending_round(sync, conn, start)
    assert sync.lpop(NEW) == second.encode()  # another worker claimed it (its claim deletes the hash)
    sync.delete(keys.rq_job_key(second))
    await d.finish(writer, first.behind, writer.ahead)
    await wait_for(lambda: len(order) == 3)
    assert order == ["start second", "closed second", "start third"]  # never two requests on the one slot
    holder = sync.get(SLOT)
    assert isinstance(holder, bytes) and holder.endswith(b":job-third")  # the ordinary claim, on the same slot
    assert not sync.exists(keys.events_key(second))  # nothing written for a round that was not ours
    await d.drain()


async def test_a_confirmation_that_fails_outright_still_tells_the_started_round_it_is_not_ours(
    sync: redis.Redis, conn: aioredis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[Claim] = []

    async def start(claim: Claim) -> None:
        started.append(claim)
        claim.sent.set()

    d, first, writer, _ = await ending_round(sync, conn, start)

    async def broken(client: aioredis.Redis, *command: Any) -> Any:
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(dispatch, "call", broken)
    with pytest.raises(ZeroDivisionError):
        await d.finish(writer, first.behind, writer.ahead)
    (claim,) = started
    assert claim.confirmed is not None and claim.confirmed.result() is False  # it stops, rather than wait forever
    await asyncio.sleep(0.05)  # the finished round's last events, already on their way


async def test_a_peeked_round_keeps_its_place_when_a_continuing_round_arrives_after_the_peek(
    sync: redis.Redis, conn: aioredis.Redis
) -> None:
    urgent = "job-urgent"
    d, claim, second = await ended_round(  # a continuing round arrives after the last peek: the next round is out
        sync, conn, lambda _: sync.rpush(keys.rq_queue_key(keys.QUEUE_CONTINUING), urgent)
    )
    assert claim.job_id == second and claim.confirmed is not None and claim.confirmed.result() is True
    assert sync.lrange(keys.rq_queue_key(keys.QUEUE_CONTINUING), 0, -1) == [urgent.encode()]  # next in line
    await d.drain()


async def test_a_round_of_another_worker_waiting_for_the_slot_wins_over_a_peeked_round(
    sync: redis.Redis, conn: aioredis.Redis
) -> None:
    d, claim, second = await ended_round(  # another worker's round polls for this GPU's slot
        sync, conn, lambda _: sync.set(keys.gpu_waiting_key(GPU), "1", px=5000)
    )
    assert claim.job_id == second and claim.confirmed is not None and claim.confirmed.result() is False
    assert not sync.exists(SLOT)  # freed for the waiting round, not kept by this worker
    assert sync.lindex(NEW, 0) == second.encode()  # still queued for whichever worker is next
    assert d.free == 1
    await d.drain()


async def test_a_speculative_rounds_events_wait_for_its_confirmation_and_are_dropped_if_it_was_not_ours(
    sync: redis.Redis, conn: aioredis.Redis
) -> None:
    task = asyncio.current_task()
    assert task is not None
    for ours in (True, False):
        gate: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        lock = GpuLock(conn, [SLOT], "worker-a:next", keys.gpu_waiting_key(GPU), held=SLOT)
        writer = EventWriter(conn, f"job-{ours}", RoundControl(task), lock, gate=gate)
        writer.put({"kind": "accepted"})
        writer.put({"kind": "token", "text": "hi"})
        await asyncio.sleep(0.05)
        assert await conn.xlen(keys.events_key(f"job-{ours}")) == 0  # nothing before the confirmation
        gate.set_result(ours)
        writer.put({"kind": "done"}, hold=True)
        await writer.close()
        assert await conn.xlen(keys.events_key(f"job-{ours}")) == (3 if ours else 0)
        assert writer._conn is None


async def test_a_speculative_round_not_confirmed_closes_its_model_request_and_leaves_no_trace(
    queue_redis: RedisServer, sync: redis.Redis, conn: aioredis.Redis
) -> None:
    state = FakeState()
    state.configure({"default": {"content": " ".join(["tok"] * 50)}, "token_delay": 0.02})
    async with serve_in_loop(state) as url, httpx.AsyncClient(event_hooks={"request": [mark_sent]}) as http:
        settings = Settings(
            redis_url=f"redis://127.0.0.1:{queue_redis.port}/0",
            ollama_url=url,
            ollama_model="qwen3:4b",
            gpu_id=GPU,
            think_holdback_models="",
        )

        async def never(claim: Claim) -> None:
            raise AssertionError("nothing is claimed in this test")

        rt = Runtime(
            settings, "worker-a", asyncio.get_running_loop(), conn, http, Dispatcher(conn, "worker-a", GPU, 1, never)
        )
        for ours in (False, True):
            job = await push(sync, keys.QUEUE_NEW, f"ours-{ours}", time.time())
            sync.set(SLOT, "worker-a:previous")
            confirmed: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
            claim = Claim(job, hash_of(sync, job), SLOT, "", f"worker-a:{job}", 0, confirmed=confirmed)
            rt.dispatcher.free = 0
            round_task = asyncio.create_task(execute_round(rt, claim))
            await asyncio.wait_for(claim.sent.wait(), 5)
            await wait_for(lambda: state.active == 1)  # generating
            sync.lpop(NEW)  # ours: what _CONFIRM does (with the slot's new token); not ours: another worker's claim
            if ours:
                sync.set(SLOT, claim.token)
            confirmed.set_result(ours)
            outcome = await asyncio.wait_for(round_task, 10)
            row = state.requests[-1]
            events = cast(list[tuple[bytes, dict[bytes, bytes]]], await conn.xrange(keys.events_key(job)))
            if not ours:
                assert outcome["outcome"] == "not_claimed" and row["outcome"] == "cancelled"
                assert events == [] and sync.get(SLOT) == b"worker-a:previous"  # no word written, slot untouched
                assert rt.dispatcher.free == 0  # the dispatcher, not the round, decides what the slot does next
            else:
                kinds = [json.loads(e[b"e"])["kind"] for _, e in events]
                assert outcome["outcome"] == "done" and row["outcome"] == "completed"
                assert kinds[:2] == ["accepted", "started"] and kinds[-1] == "done" and "text" in kinds
                assert not sync.exists(SLOT) and rt.dispatcher.free == 1  # nothing queued: the slot is freed
            assert rt.rounds == {}


def text_of_id(sync: redis.Redis, job_id: bytes | str) -> str:
    job = job_id.decode() if isinstance(job_id, bytes) else job_id
    return text_of(Claim(job, hash_of(sync, job), "", "", "", 0))


def hash_of(sync: redis.Redis, job_id: str) -> dict[bytes, bytes]:
    return cast(dict[bytes, bytes], sync.hgetall(keys.rq_job_key(job_id)))


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
