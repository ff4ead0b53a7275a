"""The only module that imports RQ: the job's function and lifetimes, the job itself, the worker of the slot processes.

RQ gives each of agent-worker's slot processes its dequeue (priority order), job timeout, result TTL,
failed-job registry, registration and signal handling. The API builds each round as RQ's job (`round_job`) and
saves RQ's hash of it with its admission check in one script (agent.queue.admit), so RQ's worker reads and runs it
as one of its own. Before RQ runs or even fully restores a job,
the worker asks agent.queue.guard whether it is one of agent-api's signed rounds; anything else is refused.

A slot process claims each round it pops, in the same breath as the pop and before RQ writes the job id anywhere
another worker could read it (RoundQueue): the claim names the worker host, and from then on the API reads the
round's events from that host's own stream alone (agent.queue.keys.events_key, claim_key).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, ClassVar, cast

import structlog
from redis import Redis
from redis.exceptions import ResponseError
from rq import Queue, SimpleWorker
from rq.exceptions import NoSuchJobError
from rq.job import Job, JobStatus
from rq.serializers import JSONSerializer

from agent.errors import RoundIntruded
from agent.queue import keys
from agent.queue.guard import JOB_FUNCTION, RoundVerifier

RESULT_TTL, FAILURE_TTL = 60, 3600
__all__ = ["FAILURE_TTL", "JOB_FUNCTION", "RESULT_TTL", "RoundWorker", "round_job", "round_worker"]

log = structlog.get_logger("agent.queue.guard")


def refused(job_id: str, queue: str, reason: str, connection: Redis) -> None:
    """A job that is not agent-api's round: logged once at error level, and deleted so no other slot takes it."""
    log.error("round_refused", job_id=job_id, queue=queue, reason=reason, writer="not agent-api: no valid signature")
    connection.delete(keys.rq_job_key(job_id))


class RoundJob(Job):
    """RQ's Job, except that a hash RQ cannot restore is a refused job, not an exception that ends the slot
    process's work loop (RQ lets anything but NoSuchJobError out of its dequeue)."""

    def restore(self, raw_data: Any) -> Any:
        try:
            return super().restore(raw_data)
        except Exception as exc:
            refused(self.id, "", f"malformed job hash: {type(exc).__name__}", self.connection)
            raise NoSuchJobError(self.id) from exc


class RoundQueue(Queue):
    """RQ's Queue, whose pop also claims the round for this worker host (`host`, set per slot process).

    The claim is entry 0-2 of the round's claim stream, which agent-api opened at admission: XADD with NOMKSTREAM and
    an explicit id, so it succeeds once per round. A worker cannot learn a queued round's id without popping it (its
    Redis user may pop the queues, not read them), so the host that pops a round is the first to claim it. A claim
    refused because another host's is already there means someone claimed a round they never popped: this host
    says so in its own stream (the API then fails the round closed, naming both) and does not run it.
    """

    host: ClassVar[str] = ""
    unclaimed: ClassVar[dict[str, str]] = {}  # job id → why this slot process must not run it

    @classmethod
    def lpop(
        cls, queue_keys: Sequence[str], timeout: int | None, connection: Redis | None = None
    ) -> tuple[Any, Any] | None:
        popped = cast(tuple[Any, Any] | None, super().lpop(queue_keys, timeout, connection=connection))
        if popped is not None and connection is not None:
            _queue_key, raw_id = popped
            job_id = raw_id.decode() if isinstance(raw_id, bytes) else str(raw_id)
            reason = claim(connection, job_id, cls.host)
            if reason is not None:
                cls.unclaimed[job_id] = reason
        return popped


def claim(connection: Redis, job_id: str, host: str) -> str | None:
    """Claim the round for `host`; why it cannot run here (None: claimed)."""
    try:
        written = connection.xadd(keys.claim_key(job_id), {"host": host}, id="0-2", nomkstream=True)
    except ResponseError as exc:
        if "equal or smaller" not in str(exc):  # e.g. NOPERM: a Redis ACL older than the claim
            log.error("round_claim_failed", job_id=job_id, host=host, error=str(exc))
            return f"claim refused by Redis: {exc}"
        log.error("round_claimed_by_another", job_id=job_id, host=host)
        stream = keys.events_key(host, job_id)
        error = RoundIntruded(f"round {job_id} was claimed by another worker host before {host} popped it")
        connection.xadd(stream, {"e": json.dumps(keys.error_entry(error))}, id="0-1")
        connection.expire(stream, keys.STREAM_TTL)
        return "claimed by another worker host"
    if written is None:  # no claim stream: agent-api gave the round up (or never admitted it)
        return "no claim stream: the round was given up or never admitted"
    return None


class RoundWorker(SimpleWorker):
    """One slot process of agent-worker: RQ's SimpleWorker (no fork: the process keeps its model connection and
    event loop from round to round), reconnecting to a restarted Redis within ~2 s instead of backing off to 60 s,
    and running only rounds agent.queue.guard accepts."""

    exponential_backoff_factor = 1.5
    max_connection_wait_time = 2.0
    log_result_lifespan = False
    job_class = RoundJob
    verifier: RoundVerifier
    round_queue: type[RoundQueue] = RoundQueue  # its queue_class: the pops it claimed, and those it could not

    def execute_job(self, job: Job, queue: Queue) -> None:
        unclaimed = self.round_queue.unclaimed.pop(job.id, None)
        if unclaimed is not None:
            refused(job.id, queue.name, unclaimed, self.connection)
            return
        fields = {
            "callbacks": job._success_callback_name or job._failure_callback_name or job._stopped_callback_name,
            "webhooks": job.webhooks,
            "dependencies": job._dependency_ids,
            "retries": job.retries_left or job.repeats_left,
        }
        try:  # RQ's JSON serializer reads the call without importing anything; the function is imported only later
            call = (job.func_name, job.instance, job.args, job.kwargs)
            reason = self.verifier.refusal(job.id, job.data, call, fields, job.meta)
        except Exception as exc:  # RQ's lazy `data` of a hash someone else wrote: any failure is a refusal
            reason = f"malformed call: {type(exc).__name__}"
        if reason is not None:
            refused(job.id, queue.name, reason, self.connection)
            return
        super().execute_job(job, queue)


_OFFLINE = Redis()  # RQ's Queue wants a connection; building a job never opens it (the API's Redis is asyncio's)


def round_job(queue: str, job_id: str, args: tuple[Any, ...], timeout: int, ttl: int, description: str) -> Job:
    """A round as RQ's own job, queued (status, enqueue time), ready for its hash (`to_dict`): built in memory, saved by
    agent.queue.admit's script."""
    job = Queue(queue, connection=_OFFLINE, serializer=JSONSerializer).create_job(
        JOB_FUNCTION,
        args=args,
        job_id=job_id,
        timeout=timeout,
        result_ttl=RESULT_TTL,
        failure_ttl=FAILURE_TTL,
        ttl=ttl,
        description=description,
        status=JobStatus.QUEUED,
    )
    job.enqueued_at = job.created_at
    return job


def round_worker(connection: Redis, name: str, verifier: RoundVerifier, host: str) -> RoundWorker:
    """An RQ worker reading the three queues in priority order (continuing rounds, new ones, client tasks) and
    claiming each round it pops for worker host `host`."""
    queue_class = type("RoundQueue", (RoundQueue,), {"host": host, "unclaimed": {}})
    queues = [
        queue_class(q, connection=connection, serializer=JSONSerializer, job_class=RoundJob) for q in keys.QUEUE_ORDER
    ]
    # RQ's log line per job names the job id only (agent-worker's own log lines name the request)
    worker = RoundWorker(
        queues, connection=connection, serializer=JSONSerializer, name=name, log_job_description=False,
        job_class=RoundJob, queue_class=queue_class,
    )  # fmt: skip
    worker.verifier, worker.round_queue = verifier, queue_class
    return worker
