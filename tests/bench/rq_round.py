"""A bare round for plain RQ workers, for scripts/bench-queue's side-by-side (`--rq`): the floor of RQ's own loop.

`run_round` is a plain RQ job function, as a port to `rq worker` would write it: it streams the round from the
model server (sync httpx, the agent's own /api/chat chunk parser) and relays the events to the round's Redis
stream in batches at most BATCH_INTERVAL apart, each batch one pipeline with the stream's TTL and the cancel
flag, exactly the entries agent.queue.client reads today (accepted, started, text…, done). It claims the round as
the job starts (agent-worker claims it in the pop itself), as the main server's host. The job's timeout,
result TTL and failure registry are RQ's (the API already sets them when it enqueues). A sync loop cannot ping
while it waits for a token; the scripted model never pauses that long.

`python -m tests.bench.rq_round worker …` is `rq worker` with this module imported first (so a forking worker
does not import it again in every work horse) and a thread that publishes the worker status key the API
counts as a live worker (agent.queue.registry), which RQ does not write.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import threading
import time
import uuid
from typing import Any

import httpx
from redis import Redis
from rq import get_current_job

from agent.backends.base import RoundRequest, event_to_dict
from agent.backends.ollama import ChatRound
from agent.errors import UpstreamError
from agent.queue import keys
from agent.queue.keys import error_entry
from agent.queue.rq_adapter import claim
from agent.queue.writer import BATCH_INTERVAL
from agent.settings import MAIN_HOST

# Built once at import, before any fork: building one costs ~0.37 s of CPU here (its TLS context), which a work
# horse would pay per round. A SimpleWorker reuses its connection; each horse opens its own (its pool is a copy).
_http = httpx.Client(timeout=httpx.Timeout(120.0, connect=5.0))


class Batches:
    """The round's pending events, sent one pipeline at a time; a set cancel flag ends the round."""

    def __init__(self, conn: Redis, job_id: str) -> None:
        self.conn, self.job_id, self.pending, self.seq, self.sent_at = conn, job_id, list[str](), 0, 0.0
        self.round_time: float | None = None

    def put(self, data: dict[str, Any]) -> None:
        self.pending.append(json.dumps(data, separators=(",", ":")))

    def due(self) -> bool:
        return bool(self.pending) and time.monotonic() - self.sent_at >= BATCH_INTERVAL

    def send(self, final: bool = False) -> bool:
        """Write what is pending; True when the API set the round's cancel flag."""
        self.sent_at = time.monotonic()
        stream = keys.events_key(MAIN_HOST, self.job_id)
        pipe = self.conn.pipeline(transaction=False)
        for data in self.pending:
            self.seq += 1
            pipe.xadd(stream, {"e": data}, id=f"0-{self.seq}")
        cancel_at, self.pending = len(self.pending) + 1, []
        pipe.expire(stream, keys.STREAM_TTL)
        pipe.get(keys.cancel_key(self.job_id))
        if final and self.round_time is not None:
            pipe.lpush(keys.ROUND_TIMES, f"{self.round_time:.4f}")
            pipe.ltrim(keys.ROUND_TIMES, 0, keys.ROUND_TIMES_KEPT - 1)
        return bool(pipe.execute()[cancel_at])


def run_round(request: dict[str, Any], enqueued_at: float, job_id: str) -> dict[str, Any]:
    """One round, start to end, inside RQ's job (its timeout bounds it)."""
    job = get_current_job()
    assert job is not None
    if claim(job.connection, job_id, MAIN_HOST) is not None:
        return {"outcome": "not claimed"}
    out = Batches(job.connection, job_id)
    out.put({"kind": "accepted", "worker": os.environ.get("RQ_BENCH_WORKER", "rq")})
    out.put({"kind": "started", "queue_wait_s": round(time.time() - enqueued_at, 6)})
    try:
        return _stream(_http, RoundRequest.from_dict(request), out)
    except Exception as exc:  # the API hears it; RQ records the job in its failed registry
        out.put(error_entry(UpstreamError(f"rq worker failed: {type(exc).__name__}: {exc}")))
        out.send(final=True)
        raise


def _stream(http: httpx.Client, request: RoundRequest, out: Batches) -> dict[str, Any]:
    chat, started = ChatRound(holdback=False), time.monotonic()
    url = os.environ["OLLAMA_URL"]
    with http.stream("POST", f"{url}/api/chat", json=request.ollama_body()) as resp:
        resp.raise_for_status()
        for line in resp.iter_lines():
            if not line.strip():
                continue
            for event in chat.events(json.loads(line)):
                out.put(event_to_dict(event))
            if chat.done is None and out.due() and out.send():
                return {"outcome": "client_cancelled"}
    if chat.done is None:
        raise UpstreamError("the model closed the stream before the answer was complete")
    out.round_time = time.monotonic() - started
    out.put(event_to_dict(chat.done))
    out.send(final=True)
    return {"outcome": "done", "gpu_seconds": out.round_time}


def _publish_status(url: str, gpu_id: str) -> None:
    """The status key agent.queue.registry reads, every second (RQ has its own worker registry, the API not)."""
    conn, wid = Redis.from_url(url), f"{gpu_id}.rq.{os.getpid()}.{uuid.uuid4().hex[:6]}"
    status = {
        "worker": wid,
        "gpu_id": gpu_id,
        "slots": 1,
        "ollama_reachable": True,
        "model_present": True,
        "warmed": True,
        "models": [os.environ.get("MODEL_NAME", "")],
        "detail": "rq worker (bench)",
    }
    while True:
        conn.set(keys.worker_status_key(wid), json.dumps({**status, "heartbeat": time.time()}), ex=keys.STATUS_TTL)
        conn.sadd(keys.WORKERS_SET, wid)
        time.sleep(1.0)


def main() -> None:
    importlib.import_module("tests.bench.rq_round")  # as itself, not __main__: the work horses find it imported
    url = sys.argv[sys.argv.index("-u") + 1]
    threading.Thread(target=_publish_status, args=(url, os.environ.get("GPU_ID", "gpu0")), daemon=True).start()
    from rq.cli.cli import main as rq_main

    rq_main()


if __name__ == "__main__":
    main()
