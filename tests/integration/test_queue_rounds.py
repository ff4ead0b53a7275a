"""A round in agent-worker's slot processes against a real Redis: its slot, its cancel flag, its end when RQ or a
signal stops it, and the slot processes that RQ's SimpleWorker runs (burst, restart, metrics of all of them).

tests/integration/test_queue_*.py run the queue's behaviours end to end through real agent-worker processes.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, cast

import httpx
import pytest
import redis
import redis.asyncio as aioredis
from rq.timeouts import JobTimeoutException, UnixSignalDeathPenalty

from agent.backends.base import RoundRequest
from agent.backends.engine import direct_backend
from agent.queue import admit, jobs, keys
from agent.queue.jobs import Runtime, execute_round, sent_trace
from agent.settings import Settings, get_settings
from tests.fakes.control import FakeOllama, serve_in_loop
from tests.fakes.fake_ollama import FakeState
from tests.integration import queue_fixtures
from tests.integration.queue_fixtures import RedisServer, Workers, answer, open_backend, request
from tests.support import round_keys
from tests.support.procs import VENV_BIN, free_port, start, wait_until

pytestmark = pytest.mark.integration
queue_redis, queue_fake, queue_workers = (
    queue_fixtures.queue_redis,
    queue_fixtures.queue_fake,
    queue_fixtures.queue_workers,
)

GPU = "gpu-test"
SLOT = keys.gpu_slot_keys("main", GPU, 1)[0]


@pytest.fixture
def sync(queue_redis: RedisServer) -> Iterator[redis.Redis]:
    queue_redis.client().flushall()
    conn = redis.Redis(port=queue_redis.port)
    yield conn
    conn.close()


@pytest.fixture
async def conn(queue_redis: RedisServer, sync: redis.Redis) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis(port=queue_redis.port)
    yield client
    await client.aclose()


def settings(port: int, model_url: str) -> Settings:
    return Settings(
        redis_url=f"redis://127.0.0.1:{port}/0",
        ollama_url=model_url,
        model_name="qwen3:4b",
        gpu_id=GPU,
        think_holdback_models="",
    )


def round_request(text: str) -> dict[str, Any]:
    return RoundRequest("qwen3:4b", [{"role": "user", "content": text}], None, {}, request_id=text).to_dict()


def kinds(sync: redis.Redis, job_id: str) -> list[dict[str, Any]]:
    entries = cast(list[tuple[bytes, dict[bytes, bytes]]], sync.xrange(keys.events_key("main", job_id)))
    return [json.loads(fields[b"e"]) for _, fields in entries]


@pytest.fixture
async def runtime(queue_redis: RedisServer, conn: aioredis.Redis) -> AsyncIterator[tuple[Runtime, FakeState]]:
    """A runtime on the test's own loop (what a slot process builds on its loop thread) and the scripted model."""
    state = FakeState()
    state.configure({"default": {"content": "one two three"}, "token_delay": 0.01})
    async with serve_in_loop(state) as url:
        config = settings(queue_redis.port, url)
        backend = direct_backend(config)
        yield Runtime(config, "worker-a", asyncio.get_running_loop(), conn, backend), state
        await backend.aclose()


async def test_a_round_streams_its_events_and_frees_its_slot(
    runtime: tuple[Runtime, FakeState], sync: redis.Redis
) -> None:
    rt, state = runtime
    outcome = await asyncio.wait_for(execute_round(rt, "job-only", round_request("only"), time.time()), 10)
    events = [e["kind"] for e in kinds(sync, "job-only")]
    assert outcome["outcome"] == "done" and state.requests[-1]["outcome"] == "completed"
    assert events[:2] == ["accepted", "started"] and events[-1] == "done" and "text" in events
    assert not sync.exists(SLOT) and rt.rounds == {}


async def test_a_round_cancelled_before_its_worker_asked_the_model_never_reaches_it(
    runtime: tuple[Runtime, FakeState], sync: redis.Redis
) -> None:
    rt, state = runtime
    sync.set(keys.cancel_key("job-gone"), "1")  # the client left after RQ had popped the round
    outcome = await asyncio.wait_for(execute_round(rt, "job-gone", round_request("gone"), time.time()), 10)
    assert outcome["outcome"] == "client_cancelled"
    assert state.requests == [] and not sync.exists(SLOT)  # read with the slot: none taken, the model not asked


async def test_a_round_waits_for_a_slot_another_worker_holds_and_takes_it_when_freed(
    runtime: tuple[Runtime, FakeState], sync: redis.Redis
) -> None:
    rt, state = runtime
    sync.set(SLOT, "worker-b:theirs")
    running = asyncio.create_task(execute_round(rt, "job-next", round_request("next"), time.time()))
    async with asyncio.timeout(5):
        while not sync.exists(keys.events_key("main", "job-next")):  # noqa: ASYNC110 - the round's state is in Redis
            await asyncio.sleep(0.01)
    await asyncio.sleep(0.2)
    assert state.requests == [] and [e["kind"] for e in kinds(sync, "job-next") if e["kind"] != "ping"] == ["accepted"]
    sync.delete(SLOT)
    assert (await asyncio.wait_for(running, 10))["outcome"] == "done"
    started = next(e for e in kinds(sync, "job-next") if e["kind"] == "started")
    assert started["queue_wait_s"] >= 0.2


async def test_the_model_client_tells_a_round_when_its_request_is_written() -> None:
    calls: list[str] = []
    async with serve_in_loop() as url, httpx.AsyncClient() as http:
        await http.get(f"{url}/api/version")  # another request on the same client: nothing to tell
        response = await http.get(f"{url}/api/version", extensions={"trace": sent_trace(lambda: calls.append("sent"))})
        assert response.status_code == 200
        assert calls == ["sent"]  # once, when its request was written


@pytest.fixture
def model(queue_fake: FakeOllama) -> Iterator[FakeOllama]:
    queue_fake.reset()
    yield queue_fake


def test_rqs_job_timeout_aborts_the_round_which_writes_its_error_and_frees_its_slot(
    queue_redis: RedisServer, sync: redis.Redis, model: FakeOllama
) -> None:
    model.script({"default": {"content": " ".join(["tok"] * 100)}, "token_delay": 0.1})
    rt = jobs.start_runtime(settings(queue_redis.port, model.url), "worker-a")
    try:
        with pytest.raises(JobTimeoutException), UnixSignalDeathPenalty(1, JobTimeoutException, job_id="job-slow"):  # type: ignore[no-untyped-call]
            jobs.run_round(round_request("slow"), time.time(), "job-slow")  # RQ's SIGALRM, as in a slot process
    finally:
        jobs.stop_runtime(rt)
    last = kinds(sync, "job-slow")[-1]
    assert last["kind"] == "error" and "RQ job timeout" in last["message"]
    assert not sync.exists(SLOT)
    wait_until(lambda: model.stats()["cancelled"] == 1, 5.0, what="the model's stream closed")


def test_a_round_run_by_a_plain_rq_worker_still_takes_the_backends_slot(
    queue_redis: RedisServer, sync: redis.Redis, model: FakeOllama, monkeypatch: pytest.MonkeyPatch
) -> None:
    model.script({"default": {"content": "ok"}})
    for name, value in {"REDIS_URL": f"redis://127.0.0.1:{queue_redis.port}/0", "OLLAMA_URL": model.url}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("GPU_ID", GPU)
    get_settings.cache_clear()
    sync.set(SLOT, "worker-b:theirs")  # another worker's round, ending in 0.5 s
    freed: list[float] = []

    def free() -> None:
        freed.append(time.time())  # before the delete: a round started the instant after it is still after this
        sync.delete(SLOT)

    timer = threading.Timer(0.5, free)
    timer.start()
    try:
        assert jobs.run_round(round_request("plain"), time.time(), "job-plain")["outcome"] == "done"
    finally:
        timer.join()
        jobs.stop_runtime(jobs._runtime[0])
        get_settings.cache_clear()
    assert model.requests()[-1]["started_at"] >= freed[0]  # it waited for the slot: no round outside the lock


async def test_burst_runs_the_queued_rounds_in_priority_order_skips_an_expired_job_and_exits(
    queue_workers: Workers, sync: redis.Redis
) -> None:
    queue_workers.fake.script({"default": {"content": "ok"}})
    sync.rpush(keys.rq_queue_key(keys.QUEUE_NEW), "expired-job")  # its hash expired while it waited
    await push(sync, keys.QUEUE_NEW, "new")
    await push(sync, keys.QUEUE_CONTINUING, "cont")
    await push(sync, keys.QUEUE_TASKS, "title", limited=False)  # last: a user round admitted after would preempt it
    env = {"REDIS_URL": queue_workers.redis.url, "OLLAMA_URL": queue_workers.fake.url, "GPU_ID": GPU}
    proc = start([str(VENV_BIN / "agent-worker"), "--burst"], env={**env, "WORKER_METRICS_PORT": str(free_port())})
    assert await asyncio.to_thread(proc.popen.wait, 30) == 0
    order = [r["messages"][-1]["content"] for r in queue_workers.fake.requests() if r["messages"]]
    assert order == ["cont", "new", "title"]
    assert sync.llen(keys.rq_queue_key(keys.QUEUE_NEW)) == 0


async def push(sync: redis.Redis, queue: str, text: str, limited: bool = True) -> str:
    """Queue a round as the API does (RQ job hash + admitting push, on an asyncio client); returns its job id."""
    job_id = f"job-{text}"
    spec = admit.JobSpec(job_id, (round_request(text), time.time(), job_id), 60, 600, 660, f"round of {text}")
    client = aioredis.Redis(port=sync.connection_pool.connection_kwargs["port"])
    try:
        admission = await admit.push(
            client, spec, queue, admit.limit(queue, 100, retried=not limited), False, round_keys.signer()
        )
    finally:
        await client.aclose()
    assert admission.admitted
    return job_id


def slot_pids(pid: int) -> list[int]:
    return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


async def test_a_slot_process_that_dies_is_started_again_and_the_worker_goes_on(queue_workers: Workers) -> None:
    queue_workers.fake.script({"default": {"content": "ok"}})
    worker = queue_workers.start()
    [first] = slot_pids(worker.popen.pid)
    os.kill(first, signal.SIGKILL)
    await asyncio.to_thread(wait_until, lambda: slot_pids(worker.popen.pid) not in ([], [first]), 15.0)
    async with open_backend(queue_workers) as backend:
        assert await answer(backend, request("after")) == "ok"
    assert "slot_process_died" in worker.output()


async def test_the_metrics_port_adds_up_every_slot_process(queue_workers: Workers) -> None:
    queue_workers.fake.script({"default": {"content": " ".join(["tok"] * 40)}, "token_delay": 0.05})
    port = free_port()
    queue_workers.start(WORKER_SLOTS="2", WORKER_METRICS_PORT=str(port))
    metrics = f"http://127.0.0.1:{port}/metrics"

    def scrape() -> str:
        return httpx.get(metrics, timeout=5).text

    async with open_backend(queue_workers) as backend:
        rounds = [asyncio.create_task(answer(backend, request(f"m{i}"))) for i in range(2)]
        await asyncio.to_thread(wait_until, lambda: 'agent_gpu_rounds{gpu="gpu0"} 2.0' in scrape(), 10.0)
        assert 'agent_gpu_busy{gpu="gpu0"} 1.0' in scrape()  # the max over the slot processes, not their sum
        await asyncio.gather(*rounds)
    text = await asyncio.to_thread(scrape)
    assert 'agent_gpu_busy{gpu="gpu0"} 0.0' in text and 'agent_gpu_rounds{gpu="gpu0"} 0.0' in text
    assert 'agent_round_duration_seconds_count{model="qwen3:4b",round="1"} 2.0' in text
    assert "pid=" not in text  # one series per GPU, not per process
