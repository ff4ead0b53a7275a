"""The only module that imports RQ: the job's function and lifetimes, the worker class of the slot processes.

RQ gives each of agent-worker's slot processes its dequeue (priority order), job timeout, result TTL,
failed-job registry, registration and signal handling. The API writes RQ's job hash itself, with its admission
check, in one script (agent.queue.admit); tests/integration/test_rq_adapter.py pins that hash against the
installed RQ's, so RQ's worker reads and runs it as one of its own.
"""

from __future__ import annotations

from redis import Redis
from rq import Queue, SimpleWorker
from rq.serializers import JSONSerializer

from agent.queue import keys

JOB_FUNCTION = "agent.queue.jobs.run_round"  # imported by the worker from this dotted name
RESULT_TTL, FAILURE_TTL = 60, 3600


class RoundWorker(SimpleWorker):
    """One slot process of agent-worker: RQ's SimpleWorker (no fork: the process keeps its model connection and
    event loop from round to round), reconnecting to a restarted Redis within ~2 s instead of backing off to 60 s."""

    exponential_backoff_factor = 1.5
    max_connection_wait_time = 2.0
    log_result_lifespan = False


def round_worker(connection: Redis, name: str) -> RoundWorker:
    """An RQ worker reading the three queues in priority order (continuing rounds, new ones, client tasks)."""
    queues = [Queue(q, connection=connection, serializer=JSONSerializer) for q in keys.QUEUE_ORDER]
    # RQ's log line per job names the job id only (agent-worker's own log lines name the request)
    return RoundWorker(queues, connection=connection, serializer=JSONSerializer, name=name, log_job_description=False)
