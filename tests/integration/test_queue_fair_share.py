"""Fair share of the GPU queue (MAX_ROUNDS_PER_USER, shipped default 3): one user's burst cannot push another user's
question to the back of a long queue. Issue 35: one ordinary user's 30 requests made another's single question
wait 61.8 s; with 12 of one user's slow rounds queued, a second user waited ~10 rounds."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from agent.backends.base import RoundRequest
from agent.errors import UserShareFull
from agent.queue.keys import fair_key
from agent.settings import Settings
from tests.integration import queue_fixtures
from tests.integration.queue_fixtures import Workers, answer, open_backend, request
from tests.support.procs import wait_until

pytestmark = pytest.mark.integration
queue_redis = queue_fixtures.queue_redis
queue_fake = queue_fixtures.queue_fake
queue_workers = queue_fixtures.queue_workers
SHIPPED = Settings.model_fields["max_rounds_per_user"].default


def of(user: str, text: str, round_no: int = 1) -> RoundRequest:
    return dataclasses.replace(request(text, round_no), share=user)


def started(group: Workers) -> list[str]:
    """The rounds the model was asked for, in the order it was asked."""
    return [r["messages"][-1]["content"] for r in group.fake.requests() if r["messages"]]


async def test_a_burst_of_twelve_slow_rounds_delays_another_users_question_by_at_most_three(
    queue_workers: Workers,
) -> None:
    assert SHIPPED == 3
    queue_workers.fake.script({"default": {"content": "slow answer", "first_token_delay": 0.4}})
    queue_workers.start()
    async with open_backend(queue_workers) as backend:  # the shipped MAX_ROUNDS_PER_USER
        burst = [asyncio.create_task(answer(backend, of("alice", f"alice-{i}"))) for i in range(12)]
        await asyncio.sleep(0)  # every one of alice's questions reaches admission before bob's
        await asyncio.to_thread(
            wait_until, lambda: any(t.done() for t in burst), 10.0, 0.01, "alice's burst admitted or refused"
        )
        bob = await answer(backend, of("bob", "bob's question"))
        results = await asyncio.gather(*burst, return_exceptions=True)
    assert bob == "slow answer"
    refused = [r for r in results if isinstance(r, UserShareFull)]
    assert len(refused) == 12 - SHIPPED and all(r.status == 429 for r in refused)
    assert all("MAX_ROUNDS_PER_USER=3" in r.client_message and r.retry_after for r in refused)
    order = started(queue_workers)
    assert order.index("bob's question") <= SHIPPED, order  # at most three of alice's rounds went first


async def test_a_conversation_under_way_is_never_refused_and_a_finished_round_frees_its_place(
    queue_workers: Workers,
) -> None:
    queue_workers.fake.script({"default": {"content": "ok", "first_token_delay": 0.3}})
    queue_workers.start()
    async with open_backend(queue_workers, max_rounds_per_user=1) as backend:
        first = asyncio.create_task(answer(backend, of("carol", "first")))
        await asyncio.to_thread(
            wait_until, lambda: queue_workers.fake.stats()["active"] == 1, 10.0, 0.01, "carol's first round running"
        )
        with pytest.raises(UserShareFull):
            await answer(backend, of("carol", "second question"))
        assert await answer(backend, of("carol", "her tool round", round_no=2)) == "ok"  # under way: admitted
        assert await first == "ok"
        await asyncio.to_thread(
            wait_until,
            lambda: queue_workers.redis.client().zcard(fair_key("carol")) == 0,
            10.0,
            0.01,
            "carol's rounds out of her share",
        )
        assert await answer(backend, of("carol", "next question")) == "ok"
        assert await answer(backend, of("", "nobody in particular")) == "ok"  # AGENT_AUTH=none: not counted
