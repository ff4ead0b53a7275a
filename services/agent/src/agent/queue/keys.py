"""What the API and the workers agree on: every Redis key the GPU queue reads or writes, how long each lives, and
the entries of a round's event stream. The one place that names them.

The API (agent.queue.client) and the workers (agent.queue.jobs, agent.queue.worker) agree on these and nothing
else; RQ's own key layout (`rq:queue:<name>`, `rq:job:<id>`) is spelled here too, because the API reads and trims
RQ's lists directly (atomic admission, cancellation of a queued round, queue depth), and the worker's RQ
processes listen on the queues in QUEUE_ORDER. tests/unit/agent/queue/test_keys.py pins that layout against the
installed RQ.

A round's event stream (events_key) holds these entries, each a JSON object with a `kind`:
accepted  the worker took the job (from then on it pings every PING_INTERVAL s, even while waiting)
started   the per-GPU lock is held and the request goes to the model server
text / thinking / tool_calls / done   agent.backends.base events, as the model produces them
error     an agent.errors class name, message and client message (`error_entry`); the API re-raises it as the
          same class (`error_from`)
ping      the worker is alive (the API treats silence as worker death)
"""

from __future__ import annotations

import hashlib
from typing import Any

from agent import errors
from agent.errors import AgentError

QUEUE_CONTINUING = "agent-rounds-continuing"  # rounds > 1: read first by every worker
QUEUE_NEW = "agent-rounds-new"
QUEUE_TASKS = "agent-rounds-tasks"  # client background tasks (titles, tags): only when no user round waits
USER_QUEUES = (QUEUE_CONTINUING, QUEUE_NEW)  # what MAX_QUEUE_DEPTH counts
QUEUE_ORDER = (*USER_QUEUES, QUEUE_TASKS)  # RQ's workers pop these in this order: the priority
TASK_ROUNDS = "agent:task_rounds"  # job ids of client task rounds under way: a user round preempts them
PREEMPT = "preempt"  # a round's cancel flag when a user round needs the GPU (client task rounds only)

WORKERS_SET = "agent:workers"  # ids of the workers that published a status (dead ones are pruned by the API)
ROUND_TIMES = "agent:round_times"  # recent GPU round durations, newest first (Retry-After estimate)
ROUND_TIMES_KEPT = 50

STATUS_TTL = 5  # seconds a worker's status key outlives its last heartbeat
STREAM_TTL = 120  # seconds an event stream outlives its last write
CANCEL_TTL = 600  # seconds a cancel flag waits for a worker to pick the round up
LOCK_TTL_MS = 5000  # a killed worker's GPU slots free themselves this fast


def rq_queue_key(name: str) -> str:
    """The Redis list RQ keeps a queue's job ids in."""
    return f"rq:queue:{name}"


RQ_QUEUE_KEYS = tuple(rq_queue_key(name) for name in QUEUE_ORDER)
RQ_USER_QUEUE_KEYS = tuple(rq_queue_key(name) for name in USER_QUEUES)
RQ_QUEUES = "rq:queues"  # the set of queue keys RQ lists (`rq info`, Queue.all)


def rq_job_key(job_id: str) -> str:
    """The Redis hash RQ saves a job in."""
    return f"rq:job:{job_id}"


def rq_worker_key(name: str) -> str:
    """The Redis hash RQ registers a worker in while it runs (a slot process of agent-worker)."""
    return f"rq:worker:{name}"


def events_key(host: str, job_id: str) -> str:
    """The stream a round's events come in: under the prefix of the worker host that claimed the round, which only
    that host's Redis user may write (images/entrypoint/redis-users), so the key itself says who wrote them."""
    return f"agent:host:{host}:round:{job_id}:events"


def claim_key(job_id: str) -> str:
    """The round's claim, a stream: agent-api opens it with entry 0-1 when it admits the round; the worker host that
    pops the round appends 0-2 naming itself in the same breath (agent.queue.rq_adapter.RoundQueue). Workers may
    only XADD here, so the first claim stays the only 0-2; a later entry is a second claimant."""
    return f"agent:round:{job_id}:claim"


def cancel_key(job_id: str) -> str:
    """Set by the API when the client went away (or to PREEMPT); the worker checks it with every write."""
    return f"agent:round:{job_id}:cancel"


def fair_key(share: str) -> str:
    """The set of a caller's rounds queued or on the GPU (MAX_ROUNDS_PER_USER), named by a digest of the caller's
    fair-share key so no user name is a Redis key."""
    return "agent:fair:" + hashlib.sha256(share.encode()).hexdigest()[:32]


def worker_status_key(worker_id: str) -> str:
    return f"agent:worker:{worker_id}:status"


def gpu_slot_keys(host: str, gpu_id: str, slots: int) -> list[str]:
    """The backend's counted lock: one key per round it may run at once (WORKER_SLOTS), under the worker host's own
    prefix, which only that host's Redis user may write (images/entrypoint/redis-users): a stolen worker password
    can hold its own host's slots, never another host's."""
    base = f"agent:host:{host}:gpu:{gpu_id}:lock"
    return [base, *(f"{base}:{k}" for k in range(1, slots))]


def error_entry(exc: AgentError) -> dict[str, Any]:
    return {
        "kind": "error",
        "error": type(exc).__name__,
        "message": exc.message,
        "public": exc.public,
        "public_tr": exc.public_tr,
        "param": exc.param,
        "code": exc.code,
        "retry_after": exc.retry_after,
    }


def error_from(data: dict[str, Any]) -> AgentError:
    """Rebuild the worker's error as the same agent.errors class (unknown names become UpstreamError)."""
    cls = getattr(errors, str(data.get("error")), None)
    if not (isinstance(cls, type) and issubclass(cls, AgentError)):
        cls = errors.UpstreamError
    code = data.get("code")
    error = cls(
        str(data.get("message")), param=data.get("param"), code=code or None, retry_after=data.get("retry_after")
    )
    if data.get("public"):
        error.public = str(data["public"])
        error.public_tr = str(data["public_tr"]) if data.get("public_tr") else None
    return error
