"""The only module that imports RQ: the job's function and lifetimes, the worker class of the slot processes.

RQ gives each of agent-worker's slot processes its dequeue (priority order), job timeout, result TTL,
failed-job registry, registration and signal handling. The API writes RQ's job hash itself, with its admission
check, in one script (agent.queue.admit); tests/integration/test_rq_adapter.py pins that hash against the
installed RQ's, so RQ's worker reads and runs it as one of its own. Before RQ runs or even fully restores a job,
the worker asks agent.queue.guard whether it is one of agent-api's signed rounds; anything else is refused.
"""

from __future__ import annotations

from typing import Any

import structlog
from redis import Redis
from rq import Queue, SimpleWorker
from rq.exceptions import NoSuchJobError
from rq.job import Job
from rq.serializers import JSONSerializer

from agent.queue import keys
from agent.queue.guard import JOB_FUNCTION, RoundVerifier

RESULT_TTL, FAILURE_TTL = 60, 3600
__all__ = ["FAILURE_TTL", "JOB_FUNCTION", "RESULT_TTL", "RoundWorker", "round_worker"]

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


class RoundWorker(SimpleWorker):
    """One slot process of agent-worker: RQ's SimpleWorker (no fork: the process keeps its model connection and
    event loop from round to round), reconnecting to a restarted Redis within ~2 s instead of backing off to 60 s,
    and running only rounds agent.queue.guard accepts."""

    exponential_backoff_factor = 1.5
    max_connection_wait_time = 2.0
    log_result_lifespan = False
    job_class = RoundJob
    verifier: RoundVerifier

    def execute_job(self, job: Job, queue: Queue) -> None:
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


def round_worker(connection: Redis, name: str, verifier: RoundVerifier) -> RoundWorker:
    """An RQ worker reading the three queues in priority order (continuing rounds, new ones, client tasks)."""
    queues = [Queue(q, connection=connection, serializer=JSONSerializer, job_class=RoundJob) for q in keys.QUEUE_ORDER]
    # RQ's log line per job names the job id only (agent-worker's own log lines name the request)
    worker = RoundWorker(
        queues, connection=connection, serializer=JSONSerializer, name=name, log_job_description=False,
        job_class=RoundJob,
    )  # fmt: skip
    worker.verifier = verifier
    return worker
