"""Issue 35: a job naming `os.system` or `builtins.exec`, pushed with the `api` user's or a `worker-NAME` user's
password, ran on every agent-worker, inside its long-lived slot process, and nothing showed in any log.

Now a slot process runs only agent-api's signed rounds (agent.queue.guard): here a stolen credential of each kind
writes, as an attacker would, whole RQ job hashes onto each of the three round queues of a real Redis with the
shipped ACL: other functions, a callback, a dependency, a malformed payload and hash, and a forged round (the round
function, a valid RQ hash, no agent-api signature, or one made for another job). Nothing runs, each refusal is
logged at error level with its job id, and the same slot process then answers a real round. (A worker password may
no longer push onto the queues at all, tests/regressions/test_one_host_answers_a_round.py: its jobs are put there by
the harness, as if pushed some other way.)"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.exceptions import NoPermissionError
from rq import Callback, Queue
from rq.serializers import JSONSerializer

from agent.queue import admit, keys
from agent.queue.guard import JOB_FUNCTION
from tests.integration import queue_fixtures
from tests.integration.queue_fixtures import RedisServer, Workers, answer, open_backend, request
from tests.support.procs import wait_until

pytestmark = pytest.mark.integration
queue_fake = queue_fixtures.queue_fake
queue_workers = queue_fixtures.queue_workers
HOST = "gpu-host-2"


@pytest.fixture(scope="module")
def queue_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """The queue's Redis with the users init-secrets ships, and one worker host added as scripts/worker-host does."""
    with queue_fixtures.shipped_acl_redis(tmp_path_factory, HOST) as server:
        yield server


def hostile_jobs(marker: Path, harness: redis.Redis) -> dict[str, tuple[str, dict[str, Any]]]:
    """Job hashes as RQ itself writes them (so only what they name differs from a round), by what they try."""
    queue = Queue(keys.QUEUE_NEW, connection=harness, serializer=JSONSerializer)
    enqueued_at = time.time()

    def made(func: str, *args: Any, **options: Any) -> tuple[str, dict[str, Any]]:
        job_id = f"evil-{uuid.uuid4().hex[:8]}"
        if func == JOB_FUNCTION:
            args = (admit.request_fields(request("hi")), enqueued_at, job_id)
        job = queue.create_job(func, args=args, job_id=job_id, **options)
        return job_id, {k: v for k, v in job.to_dict().items() if v is not None}

    def changed(made_job: tuple[str, dict[str, Any]], **fields: Any) -> tuple[str, dict[str, Any]]:
        return made_job[0], {**made_job[1], **fields}

    return {
        "os.system": made("os.system", f"touch {marker}"),
        "builtins.exec": made("builtins.exec", f"open({str(marker)!r}, 'w').close()"),
        "a success callback": made(JOB_FUNCTION, on_success=Callback("os.system")),
        "a dependency": made(JOB_FUNCTION, depends_on="some-other-job"),
        "a malformed payload": changed(made(JOB_FUNCTION), data=b"\x00not json"),
        "a malformed hash": changed(made(JOB_FUNCTION), created_at="yesterday"),
        "a forged round (no signature)": made(JOB_FUNCTION),
        "a signature that verifies nothing": changed(made(JOB_FUNCTION), meta=json.dumps({"signature": "A" * 88})),
    }


@pytest.mark.parametrize("user", ["api", f"worker-{HOST}"])
@pytest.mark.parametrize("queue", keys.QUEUE_ORDER)
async def test_jobs_pushed_with_a_stolen_password_run_nothing_and_the_worker_keeps_serving(
    queue_workers: Workers, tmp_path: Path, user: str, queue: str
) -> None:
    marker = tmp_path / "pwned"
    worker = queue_workers.start()
    attacker = queue_fixtures.login_as(queue_workers.redis, user)
    pushed = []
    for what, (job_id, fields) in hostile_jobs(marker, queue_workers.redis.client()).items():
        fields["origin"] = queue
        attacker.hset(keys.rq_job_key(job_id), items=[part for pair in fields.items() for part in pair])
        if user.startswith("worker-"):  # a worker password may pop the queues, no longer push onto them
            with pytest.raises(NoPermissionError):
                attacker.rpush(keys.rq_queue_key(queue), job_id)
            queue_workers.redis.client().rpush(keys.rq_queue_key(queue), job_id)  # as if pushed some other way
        else:
            attacker.rpush(keys.rq_queue_key(queue), job_id)
        pushed.append((what, job_id))

    def refusals() -> list[dict[str, Any]]:
        lines = [json.loads(line) for line in worker.output().splitlines() if line.startswith("{")]
        return [line for line in lines if line.get("event") == "round_refused"]

    wait_until(lambda: len(refusals()) == len(pushed), timeout=30, what="every hostile job refused")
    assert {r["job_id"] for r in refusals()} == {job_id for _, job_id in pushed}
    assert all(r["level"] == "error" and r["reason"] for r in refusals())
    assert not marker.exists()
    assert not any(queue_workers.redis.client().exists(keys.rq_job_key(job_id)) for _, job_id in pushed)

    async with open_backend(queue_workers) as backend:  # the same slot process answers a real, signed round
        assert await answer(backend, request("still there?"))
    assert worker.popen.poll() is None and not marker.exists()
