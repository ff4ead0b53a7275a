"""A worker told to stop (SIGTERM: a Kubernetes scale-down or node drain, `docker compose stop`) finishes the round it
is running and takes no new one, so scaling GPU workers down never cuts an answer (deploy/kubernetes, KEDA)."""

from __future__ import annotations

import asyncio
import contextlib
import signal

import pytest

from agent.queue.keys import RQ_QUEUE_KEYS
from tests.integration import queue_fixtures
from tests.integration.queue_fixtures import Workers, answer, open_backend, request
from tests.support.procs import wait_until

pytestmark = pytest.mark.integration
queue_redis = queue_fixtures.queue_redis
queue_fake = queue_fixtures.queue_fake
queue_workers = queue_fixtures.queue_workers


def asked(group: Workers) -> list[str]:
    return [r["messages"][-1]["content"] for r in group.fake.requests() if r["messages"]]


async def test_a_worker_under_sigterm_finishes_its_round_and_takes_no_new_one(queue_workers: Workers) -> None:
    queue_workers.fake.script(
        {
            "rules": [
                {
                    "when": {"user_contains": "running"},
                    "reply": {"content": "the whole answer", "first_token_delay": 1.5},
                }
            ],
            "default": {"content": "should never run"},
        }
    )
    worker = queue_workers.start()
    async with open_backend(queue_workers) as backend:
        running = asyncio.create_task(answer(backend, request("running")))
        await asyncio.to_thread(
            wait_until, lambda: queue_workers.fake.stats()["active"] == 1, 15.0, 0.01, "the round generating"
        )
        worker.popen.send_signal(signal.SIGTERM)  # what the kubelet sends, then waits the grace period
        later = asyncio.create_task(answer(backend, request("queued after the signal")))
        assert await running == "the whole answer"  # the round under way was not cut
        await asyncio.to_thread(wait_until, lambda: worker.popen.poll() is not None, 30.0, 0.1, "the worker gone")
        assert worker.popen.returncode == 0
        client = queue_workers.redis.client()
        await asyncio.to_thread(
            wait_until, lambda: sum(client.llen(k) for k in RQ_QUEUE_KEYS) == 1, 10.0, 0.05, "the new round queued"
        )
        assert asked(queue_workers) == ["running"]  # the draining worker took no new round
        later.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await later
