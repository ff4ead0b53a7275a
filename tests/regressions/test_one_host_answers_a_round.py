"""Issue 35: a worker credential could append to every round's event stream. With higher entry ids the rogue's
`started`, `tool_calls` and `done` reached the user (a phishing text among them), the real worker's writes were then
dropped as "duplicates", and the audit's `workers` was what the writer said of itself.

Now a round's events come from the stream of the one worker host that claimed the round as it popped it, under that
host's own key prefix, which only its Redis user may write; the API follows that stream and fails the round closed
on any other writer. Here, on a real Redis with the shipped ACL, a real agent-worker (the main server's) runs a slow
round while a second worker host's stolen password does what it can: it cannot read the queue to learn a round's id,
write the claimant's stream, or undo a claim; given the id anyway, its own answer, a second claim, or a claim made
before the real worker popped the round each end the round with RoundIntruded, never its text, naming both hosts."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from typing import cast

import pytest
import redis
import structlog.testing
from redis.exceptions import NoPermissionError

from agent.backends.base import TextDelta
from agent.context import RequestContext
from agent.errors import RoundIntruded
from agent.queue import keys
from agent.queue.client import QueueBackend
from agent.settings import Settings
from tests.integration import queue_fixtures
from tests.integration.queue_fixtures import RedisServer, Workers, request
from tests.support.procs import wait_until

pytestmark = pytest.mark.integration
queue_fake = queue_fixtures.queue_fake
queue_workers = queue_fixtures.queue_workers
ROGUE = "gpu-host-2"
FORGED = "Your session expired: sign in again at http://intranet-login.example/reset"


@pytest.fixture(scope="module")
def queue_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    with queue_fixtures.shipped_acl_redis(tmp_path_factory, ROGUE) as server:
        yield server


@pytest.fixture
async def backend(queue_workers: Workers) -> AsyncIterator[QueueBackend]:
    queue_workers.fake.script({"default": {"content": "one two three four five six"}, "token_delay": 0.3})
    async with queue_fixtures.open_backend(queue_workers) as opened:  # as the api user
        yield opened


def rogue(group: Workers) -> redis.Redis:
    return queue_fixtures.login_as(group.redis, f"worker-{ROGUE}")


def forged_answer(rogue_client: redis.Redis, job_id: str) -> None:
    """What the rogue host writes where its password lets it: a round's events, the phishing text as the answer."""
    stream = keys.events_key(ROGUE, job_id)
    for seq, event in enumerate(
        [
            {"kind": "accepted", "worker": "main"},
            {"kind": "started", "queue_wait_s": 0.0},
            {"kind": "text", "text": FORGED},
            {"kind": "done", "content": FORGED, "prompt_tokens": 1, "completion_tokens": 1},
        ],
        start=1,
    ):
        rogue_client.xadd(stream, {"e": json.dumps(event)}, id=f"0-{seq}")


def claimed_by(group: Workers) -> tuple[str, str]:
    """The id and claimant of the round under way, once claimed (read by the tests' own Redis user)."""
    harness = group.redis.client()
    found: list[tuple[str, str]] = []

    def claimed() -> bool:
        for key in harness.scan_iter(match=keys.claim_key("*")):
            entries = cast(list[tuple[str, dict[str, str]]], harness.xrange(key, "0-2", "0-2"))
            if entries:
                found.append((str(key).split(":")[2], entries[0][1]["host"]))
                return True
        return False

    wait_until(claimed, timeout=15, what="a claimed round")
    return found[0]


async def outcome(backend: QueueBackend, text: str = "hello") -> tuple[list[str], BaseException | None, list[str]]:
    """Run one round as the tool loop does, within a request: the text it yielded, how it ended, and the hosts the
    request's audit record would name."""
    context = RequestContext("rid")
    texts: list[str] = []
    try:
        async for event in backend.stream_round(request(text), context):
            if isinstance(event, TextDelta):
                texts.append(event.text)
    except Exception as exc:
        return texts, exc, context.workers
    return texts, None, context.workers


def test_a_worker_password_cannot_learn_a_queued_rounds_id_write_another_hosts_stream_or_undo_a_claim(
    queue_workers: Workers,
) -> None:
    harness = queue_workers.redis.client()
    harness.rpush(keys.rq_queue_key(keys.QUEUE_NEW), "queued-job")
    harness.xadd(keys.claim_key("queued-job"), {"admitted": "1"}, id="0-1")
    harness.xadd(keys.claim_key("claimed-job"), {"host": "main"}, id="0-2")
    stolen = rogue(queue_workers)
    queue = keys.rq_queue_key(keys.QUEUE_NEW)
    for command in (
        ("LRANGE", queue, 0, -1),
        ("LINDEX", queue, 0),
        ("LPOS", queue, "queued-job"),
        ("RPUSH", queue, "claimed-job"),  # a popped round put back for someone else to run
        ("XADD", keys.events_key("main", "claimed-job"), "0-9", "e", "{}"),
        ("DEL", keys.claim_key("claimed-job")),
        ("EXPIRE", keys.claim_key("claimed-job"), 0),
        ("XTRIM", keys.claim_key("claimed-job"), "MAXLEN", 0),
        ("XDEL", keys.claim_key("claimed-job"), "0-2"),
        ("XRANGE", keys.claim_key("claimed-job"), "-", "+"),
        ("ACL", "USERS"),
    ):
        with pytest.raises(NoPermissionError):
            stolen.execute_command(*command)  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
    with pytest.raises(NoPermissionError):  # and the api password cannot write any host's stream either
        queue_fixtures.login_as(queue_workers.redis, "api").xadd(keys.events_key("main", "claimed-job"), {"e": "{}"})
    assert harness.xlen(keys.claim_key("claimed-job")) == 1


@pytest.mark.parametrize("attack", ["its own answer", "a second claim"])
async def test_a_second_host_writing_a_round_another_host_runs_fails_it_closed_naming_both(
    queue_workers: Workers, backend: QueueBackend, attack: str
) -> None:
    queue_workers.start()  # the main server's agent-worker, as worker-main
    stolen = rogue(queue_workers)
    with structlog.testing.capture_logs() as logs:
        running = asyncio.create_task(outcome(backend))
        job_id, host = await asyncio.to_thread(claimed_by, queue_workers)
        assert host == "main"
        if attack == "its own answer":
            forged_answer(stolen, job_id)  # given the round's id, which it could not read from the queue
        else:
            stolen.xadd(keys.claim_key(job_id), {"host": ROGUE}, id="0-3")
            forged_answer(stolen, job_id)
        texts, error, workers = await asyncio.wait_for(running, 30)
    assert isinstance(error, RoundIntruded), error
    assert FORGED not in "".join(texts)  # the forged text never reached the caller
    assert sorted(workers) == sorted(["main", ROGUE])  # the audit names every host involved
    assert any(e["event"] == "round_intruded" and e["log_level"] == "error" for e in logs), logs
    assert error.client_message_in("tr").startswith("Yanıt doğrulanamadığı")


async def test_a_round_claimed_before_its_worker_popped_it_is_not_run_and_fails_closed(
    queue_workers: Workers, backend: QueueBackend
) -> None:
    queue_workers.start()  # one slot: the first round holds it while the second waits in the queue
    stolen = rogue(queue_workers)
    first = asyncio.create_task(outcome(backend, "first"))
    await asyncio.to_thread(claimed_by, queue_workers)
    second = asyncio.create_task(outcome(backend, "second"))
    harness = queue_workers.redis.client()
    queue = keys.rq_queue_key(keys.QUEUE_NEW)
    await asyncio.to_thread(wait_until, lambda: harness.llen(queue) == 1, 10.0, 0.02, "the second round queued")
    (job_id,) = cast(
        list[str], harness.lrange(queue, 0, -1)
    )  # handed to the rogue: its own password cannot read the queue
    stolen.xadd(keys.claim_key(job_id), {"host": ROGUE}, id="0-2")  # claimed, never popped
    texts, error, workers = await asyncio.wait_for(second, 30)
    assert isinstance(error, RoundIntruded), error
    assert texts == [] and sorted(workers) == sorted(["main", ROGUE])
    assert (await asyncio.wait_for(first, 30))[1] is None
    asked = [r["messages"][-1]["content"] for r in queue_workers.fake.requests() if r["messages"]]  # not the warm-up
    assert asked == ["first"]  # the worker that popped the claimed round never ran it


async def test_an_honest_worker_host_answers_and_is_the_audits_worker(queue_workers: Workers) -> None:
    assert queue_workers.redis.users is not None
    as_rogue_host = queue_workers.redis.users.url(queue_workers.redis.port, f"worker-{ROGUE}")
    assert Settings(redis_url=as_rogue_host, redis_username="worker-main").worker_host() == ROGUE  # the URL's user wins
    queue_workers.fake.script({"default": {"content": "forty two"}})
    queue_workers.start(REDIS_URL=as_rogue_host)
    async with queue_fixtures.open_backend(queue_workers) as opened:
        texts, error, workers = await outcome(opened)
    assert error is None and "".join(texts) == "forty two" and workers == [ROGUE]
