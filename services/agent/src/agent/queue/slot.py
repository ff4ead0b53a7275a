"""One slot process of agent-worker: an RQ SimpleWorker running one round at a time (started by agent.queue.worker).

`python -m agent.queue.slot NAME --parent PID [--burst]`. RQ pops the rounds (continuing rounds first) and
calls agent.queue.jobs.run_round; RQ's signal handling gives the warm shutdown (SIGTERM: finish the round under
way, take no new one) and the cold one (a second SIGTERM: the round is aborted with a clear error). The process
dies with its agent-worker: a worker killed with SIGKILL takes its rounds with it, as one process would.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import signal
import sys

from redis import Redis
from redis.backoff import ExponentialBackoff
from redis.exceptions import RedisError
from redis.retry import Retry

from agent import cli
from agent.metrics import GPU_BUSY, GPU_ROUNDS
from agent.queue import jobs, rq_adapter
from agent.queue.guard import RoundVerifier
from agent.redisconn import connection_options, fix_hint, redacted
from agent.settings import Settings, get_settings
from agent_contract.logs import configure

_PR_SET_PDEATHSIG = 1


def connect(settings: Settings) -> Redis:
    """RQ's connection, checked once: Redis down at start is one line naming the URL, not a traceback."""
    try:
        options = connection_options(settings)
    except ValueError as exc:  # an unreadable password or TLS file, TLS files with a redis:// URL
        raise cli.UsageError(str(exc)) from exc
    conn = Redis.from_url(
        settings.redis_url,
        **options,
        socket_connect_timeout=2,
        health_check_interval=30,
        retry=Retry(ExponentialBackoff(cap=0.5, base=0.05), 3),
    )
    try:
        conn.ping()
    except RedisError as exc:
        raise cli.UsageError(
            f"Redis unreachable at {redacted(settings.redis_url)} ({type(exc).__name__}: {exc}). {fix_hint(exc)}"
        ) from exc
    return conn


def die_with(parent: int) -> None:
    """SIGKILL this process when its agent-worker dies (Linux); exit at once if it is already gone."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        raise SystemExit(1)


def work(name: str, parent: int, burst: bool) -> int:
    settings = get_settings()
    configure(settings.log_level, service="agent-worker")
    die_with(parent)
    try:
        verifier = RoundVerifier(settings.round_verify_secret(), max_age=settings.queue_timeout_seconds + 60)
    except ValueError as exc:
        raise cli.UsageError(str(exc)) from exc
    conn = connect(settings)
    GPU_BUSY.labels(settings.gpu_id).set(0)
    GPU_ROUNDS.labels(settings.gpu_id).set(0)
    rt = jobs.start_runtime(settings, name)
    worker = rq_adapter.round_worker(conn, name, verifier, settings.worker_host())
    try:
        worker.work(burst=burst, logging_level="DEBUG" if settings.log_level.upper() == "DEBUG" else "WARNING")
    finally:
        jobs.stop_runtime(rt)
        conn.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser("agent-worker slot", description=__doc__.splitlines()[0])
    parser.add_argument("name", help="the RQ worker's name (unique: agent-worker's id, the slot, a serial)")
    parser.add_argument("--parent", type=int, required=True, help="the agent-worker process to die with")
    parser.add_argument("--burst", action="store_true", help="exit once the queues are empty")
    args = parser.parse_args(argv)
    return cli.run("agent-worker", lambda: work(args.name, args.parent, args.burst))


if __name__ == "__main__":
    raise SystemExit(main())
