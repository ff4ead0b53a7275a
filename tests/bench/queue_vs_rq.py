"""bench-queue --rq: the shipped agent-worker next to plain RQ workers running a bare round, against the scripted model.

Three implementations, each with one slot and its own Redis database on one redis-server, all started once and
measured in turn (interleaved: per repetition, per round length, each implementation):
  agent-worker      the shipped worker: one slot process, RQ's SimpleWorker running agent.queue.jobs.run_round
                    (the round on an event loop, the slot lock, pings, the cancel flag; agent.queue.worker --slot)
  rq SimpleWorker   `rq worker -w rq.worker.SimpleWorker` running tests.bench.rq_round.run_round: a bare sync
                    round (no slot lock, no pings), the floor of what RQ's loop costs
  rq Worker (fork)  `rq worker` running the same bare round: RQ's default, a work horse forked per job
All three read the three priority queues in order; the API side is the shipped QueueBackend in every case (only
the job's function name differs). CLIENTS clients each submit
rounds back to back, so rounds always wait and the model is never idle for want of work.

Per cell: GPU busy % (the fake's own generation timestamps: union of generations over first start to last
end), the gap between two generations, the queue wait the API observed (enqueue to the `started` event), and
CPU per round of the worker process (children included) plus redis-server, and of this (API) process.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import redis

from agent.backends.base import RoundDone, RoundRequest
from agent.queue import client as queue_client
from agent.queue import rq_adapter
from agent.queue.client import QueueBackend
from agent.settings import Settings
from tests.bench.stats import pct
from tests.fakes.control import busy_from
from tests.support.procs import VENV_BIN, Proc, free_port, running

MODEL = "qwen3:4b"
TOKEN_DELAY = 0.0125  # 80 tokens/s: a 4B model on an 8 GB card
LENGTHS = (0.2, 1.0, 3.0)  # s per round
ROUNDS = {0.2: 40, 1.0: 20, 3.0: 8}  # per cell and repetition
QUICK_ROUNDS = {0.2: 15, 1.0: 8, 3.0: 4}
CLIENTS = 3
IMPLS = ("agent-worker", "rq SimpleWorker", "rq Worker (fork)")
RQ_FUNCTION = "tests.bench.rq_round.run_round"
QUEUES = ("agent-rounds-continuing", "agent-rounds-new", "agent-rounds-tasks")  # agent.queue.keys.QUEUE_ORDER


@dataclass
class Cell:
    busy: list[float] = field(default_factory=list)  # one fraction per repetition
    gaps: list[float] = field(default_factory=list)
    waits: list[float] = field(default_factory=list)
    worker_cpu: list[float] = field(default_factory=list)  # s per round, per repetition (worker + redis-server)
    api_cpu: list[float] = field(default_factory=list)


class Waits:
    """Stands in for the QUEUE_WAIT histogram of agent.queue.client: keeps every observation."""

    def __init__(self) -> None:
        self.values: list[float] = []

    def observe(self, value: float) -> None:
        self.values.append(value)


def cpu_s(pid: int) -> float:
    """utime + stime of the process, its reaped children (a fork worker's horses) and its live ones (agent-worker's
    slot processes), seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    live = [int(c) for t in Path(f"/proc/{pid}/task").iterdir() for c in (t / "children").read_text().split()]
    return sum(int(v) for v in fields[11:15]) / os.sysconf("SC_CLK_TCK") + sum(cpu_s(c) for c in live)


def worker_cmds(url: str) -> dict[str, list[str]]:
    rq = [
        sys.executable,
        "-m",
        "tests.bench.rq_round",
        "worker",
        "-S",
        "json",
        "--disable-job-desc-logging",
        "--logging_level",
        "WARNING",
        "-u",
    ]
    return {
        IMPLS[0]: [str(VENV_BIN / "agent-worker")],
        IMPLS[1]: [*rq, f"{url}/1", "-w", "rq.worker.SimpleWorker", *QUEUES],
        IMPLS[2]: [*rq, f"{url}/2", *QUEUES],
    }


def start_workers(stack: ExitStack, url: str, fake: str, env: dict[str, str]) -> dict[str, tuple[str, Proc]]:
    started = {}
    for db, (impl, cmd) in enumerate(worker_cmds(url).items()):
        db_url = f"{url}/{db}"

        def ready(u: str = db_url) -> bool:
            return bool(redis.Redis.from_url(u).smembers("agent:workers"))

        own_env = {**env, "REDIS_URL": db_url, "OLLAMA_URL": fake, "WORKER_METRICS_PORT": str(free_port())}
        proc = stack.enter_context(running(cmd, env=own_env, ready=ready))
        started[impl] = (db_url, proc)
    return started


def req(text: str) -> RoundRequest:
    return RoundRequest(
        MODEL,
        [{"role": "user", "content": text}],
        None,
        {"num_ctx": 8192, "temperature": 0.0},
        request_id=f"bench-{text}",
        round=1,
    )


async def drive(queue: QueueBackend, rounds: int) -> None:
    """CLIENTS clients submitting rounds back to back until `rounds` are done."""
    todo = iter(range(rounds))

    async def client() -> None:
        for i in todo:
            async for event in queue.stream_round(req(f"r{i}")):
                if isinstance(event, RoundDone):
                    break

    await asyncio.gather(*(client() for _ in range(CLIENTS)))


async def measure(
    queue: QueueBackend, fake: httpx.AsyncClient, length: float, rounds: int, pids: tuple[int, int], cell: Cell
) -> None:
    tokens = max(1, round(length / TOKEN_DELAY))
    (await fake.post("/_fake/reset")).raise_for_status()
    body = {"default": {"content": " ".join(["tok"] * tokens)}, "token_delay": TOKEN_DELAY}
    (await fake.post("/_fake/script", json=body)).raise_for_status()
    waits = queue_client.QUEUE_WAIT = Waits()  # type: ignore[assignment,attr-defined]
    before, api_before = sum(cpu_s(p) for p in pids), time.process_time()
    await drive(queue, rounds)
    after, api_after = sum(cpu_s(p) for p in pids), time.process_time()
    busy = busy_from((await fake.get("/_fake/requests")).json())
    cell.busy.append(busy.fraction)
    cell.gaps += busy.gaps
    cell.waits += waits.values
    cell.worker_cpu.append((after - before) / rounds)
    cell.api_cpu.append((api_after - api_before) / rounds)


def settings_for(redis_url: str, fake: str) -> Settings:
    return Settings(
        redis_url=redis_url,
        ollama_url=fake,
        model_name=MODEL,
        model_backend="queue",
        max_queue_depth=256,
        think_holdback_models="",
    )


async def side_by_side(
    workers: dict[str, tuple[str, Proc]], redis_pid: int, fake_url: str, reps: int, quick: bool
) -> dict[tuple[str, float], Cell]:
    cells = {(impl, length): Cell() for impl in IMPLS for length in LENGTHS}
    queues = {impl: QueueBackend(settings_for(url, fake_url)) for impl, (url, _) in workers.items()}
    shipped, plan = rq_adapter.JOB_FUNCTION, QUICK_ROUNDS if quick else ROUNDS
    try:
        async with httpx.AsyncClient(base_url=fake_url, timeout=10) as fake:
            for rep in range(-1, reps):  # repetition -1 warms every worker up and is discarded
                for length in LENGTHS if rep >= 0 else (0.2,):
                    for impl in IMPLS:
                        rq_adapter.JOB_FUNCTION = shipped if impl == IMPLS[0] else RQ_FUNCTION
                        pids = (workers[impl][1].popen.pid, redis_pid)
                        cell = cells[impl, length] if rep >= 0 else Cell()
                        await measure(queues[impl], fake, length, plan[length] if rep >= 0 else 4, pids, cell)
    finally:
        rq_adapter.JOB_FUNCTION = shipped
        for queue in queues.values():
            await queue.aclose()
    return cells


def table(cells: dict[tuple[str, float], Cell], reps: int) -> Iterator[str]:
    yield (
        f"5. agent-worker vs plain RQ workers on a bare round: {CLIENTS} clients back to back, 1 slot, "
        f"{TOKEN_DELAY * 1000:g} ms "
        f"per token, {reps} interleaved repetitions"
    )
    yield (
        "   round  implementation     GPU busy (min-max)        gap p50 / p99 ms   wait p50 / p99 s   "
        "CPU ms/round worker+redis / api"
    )
    for length in LENGTHS:
        for impl in IMPLS:
            c = cells[impl, length]
            busy = statistics.mean(c.busy)
            gaps = [g * 1000 for g in c.gaps] or [0.0]
            yield (
                f"   {length:4.1f} s {impl:<18} {busy:7.2%} ({min(c.busy):6.2%}-{max(c.busy):6.2%})  "
                f"{statistics.median(gaps):7.2f} / {pct(gaps, 99):7.2f}    "
                f"{statistics.median(c.waits):5.2f} / {pct(c.waits, 99):5.2f}      "
                f"{statistics.mean(c.worker_cpu) * 1000:7.1f} / {statistics.mean(c.api_cpu) * 1000:6.1f}"
            )
    own = statistics.mean(cells[IMPLS[0], 1.0].busy)
    bare = statistics.mean(cells[IMPLS[1], 1.0].busy)
    yield (
        f"   at 1 s rounds: agent-worker {own:.2%}, bare RQ SimpleWorker round {bare:.2%}: {(own - bare) * 100:+.2f} "
        "points (what the slot lock, the pings and the event-loop round cost or save)"
    )
