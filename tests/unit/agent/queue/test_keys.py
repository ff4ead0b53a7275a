"""Redis key names: RQ keeps its lists and hashes where agent.queue.keys says, and no other module spells them."""

from __future__ import annotations

from pathlib import Path

from redis import Redis
from rq import Queue, SimpleWorker
from rq.job import Job

from agent.queue import guard, jobs, keys, rq_adapter

REPO = Path(__file__).resolve().parents[4]


def test_rq_keeps_queues_and_jobs_under_the_keys_the_api_reads_and_trims() -> None:
    conn = Redis()  # never connects: only the key names are read
    assert [Queue(name, connection=conn).key for name in keys.QUEUE_ORDER] == list(keys.RQ_QUEUE_KEYS)
    assert Job.key_for("abc") == keys.rq_job_key("abc")
    assert Queue.redis_queues_keys == keys.RQ_QUEUES  # where `rq info` finds the queues
    # agent-worker publishes its status once one of its slot processes is registered under this key
    assert SimpleWorker([], connection=conn, name="w1").key == keys.rq_worker_key("w1")


def test_the_queues_are_distinct_continuing_rounds_first_client_tasks_last() -> None:
    assert keys.QUEUE_ORDER == (keys.QUEUE_CONTINUING, keys.QUEUE_NEW, keys.QUEUE_TASKS)
    assert len(set(keys.RQ_QUEUE_KEYS)) == 3
    assert keys.RQ_QUEUE_KEYS[:2] == keys.RQ_USER_QUEUE_KEYS  # what MAX_QUEUE_DEPTH counts


def test_no_module_but_keys_spells_a_queue_key() -> None:
    needles = ("rq:" + "queue:", "rq:" + "job:", "agent:" + "round")
    offenders = [
        str(path.relative_to(REPO))
        for folder in ("services", "mcp-server", "tests")
        for path in (REPO / folder).rglob("*.py")
        if path.name != "keys.py" and any(n in path.read_text(encoding="utf-8") for n in needles)
    ]
    assert offenders == []


def test_the_round_function_the_jobs_name_is_run_round() -> None:
    """Jobs name the round function by its dotted path (RQ imports it in the slot process, and the guard refuses any
    other name): the path is the real function's, so a rename or a move fails here, not on every round."""
    assert rq_adapter.round_job(keys.QUEUE_NEW, "j", ({}, 0.0, "j"), 60, 60, "t").func_name == guard.JOB_FUNCTION
    assert f"{jobs.run_round.__module__}.{jobs.run_round.__qualname__}" == guard.JOB_FUNCTION
