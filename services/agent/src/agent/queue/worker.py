"""agent-worker: runs LLM rounds from the GPU queue on one backend, WORKER_SLOTS at a time, and reports its state.

The rounds run in WORKER_SLOTS slot processes (`agent-worker --slot NAME --parent PID`, `slot_work`), each RQ's
SimpleWorker running one round at a time: RQ pops the rounds (continuing rounds first) and calls
agent.queue.jobs.run_round. A slot process dies with its agent-worker (a worker killed with SIGKILL takes its
rounds with it, as one process would). The agent-worker process keeps what RQ has no place for: the status the
API reads (model present, warm-up, slots, a heartbeat every second: agent.queue.registry), one model warm-up for
the backend rather than one per slot, the /metrics port for all its slot processes, and the slot processes
themselves (started, restarted when one dies, stopped together). SIGTERM is passed on to them, and RQ's signal
handling does the rest: the first lets the rounds under way finish and takes no new one, a second aborts them
with a clear error. The per-round part of what RQ lacks (pings, the cancel flag, the backend's counted slot
lock) lives in agent.queue.writer.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import redis.asyncio as aioredis
import structlog
from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead
from redis import Redis
from redis.backoff import ExponentialBackoff
from redis.exceptions import RedisError
from redis.retry import Retry

from agent import cli
from agent.backends.engine import engine_status
from agent.backends.models import has_model
from agent.backends.ollama import pull_hint, warm_up
from agent.metrics import MODEL_PRESENT, MODEL_UP, OLLAMA_UP
from agent.queue import jobs, keys, rq_adapter
from agent.queue.guard import RoundVerifier
from agent.redisconn import connection_options, fix_hint, redacted
from agent.settings import Settings, get_settings
from agent_contract.logs import configure

STATUS_EVERY = 1.0
PROBE_EVERY = 15.0  # re-read /api/tags this often (faster while Ollama or the model is missing)
CHECK_EVERY = 0.2  # s between looks at the slot processes
STOP_WAIT = 10.0  # s: at most this long the status loop may take to end
RESTART_AFTER = 1.0  # s: a slot process that died is started again no sooner (one that cannot start is not a spin)
_PR_SET_PDEATHSIG = 1

log = structlog.get_logger("agent.queue.worker")


class StatusReporter:
    """Warms the model up with the rounds' own options and publishes this worker's status to Redis."""

    def __init__(
        self,
        settings: Settings,
        worker: str,
        redis: aioredis.Redis,
        http: httpx.AsyncClient,
        slot_names: Callable[[], list[str]] = list,
    ) -> None:
        self.settings, self.worker, self.redis, self.http = settings, worker, redis, http
        self.slot_names = slot_names  # the RQ names of the slot processes running now
        self.status: dict[str, Any] = {
            "worker": worker,
            "gpu_id": settings.gpu_id,
            "ollama_url": settings.model_endpoint(),
            "protocol": settings.model_protocol,
            "model": settings.model_name,
            "pid": os.getpid(),
            "slots": settings.worker_slots,
            "ollama_reachable": False,
            "model_present": False,
            "warmed": False,
            "models": [],
            "ollama_version": None,
            "engine": "",
            "scripted": False,
            "detail": "starting",
        }
        self._probed = 0.0
        self.stopped = asyncio.Event()

    async def run(self) -> None:
        """Until `stopped` is set. A flag, not only a cancellation: once, in tests, agent-worker did not exit after
        its slot processes had, idle in its event loop (cause not found; a cancellation lost in a call under way
        would do it). supervise() sets the flag, then cancels."""
        while not self.stopped.is_set():
            if time.monotonic() - self._probed >= self._probe_interval():
                await self.probe()
            await self.publish()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(STATUS_EVERY):
                    await self.stopped.wait()

    def _probe_interval(self) -> float:
        healthy = self.status["model_present"] and self.status["warmed"]
        return PROBE_EVERY if healthy else 3.0

    async def probe(self) -> None:
        self._probed = time.monotonic()
        settings, url = self.settings, self.settings.model_endpoint()
        status = await engine_status(self.http, settings)
        present = has_model(status.models, settings.model_name)
        self.status.update(
            ollama_reachable=status.reachable,
            ollama_version=status.version,
            engine=status.engine,
            scripted=status.scripted,
            models=status.models,
            model_present=present,
        )
        for gauge in (MODEL_UP, OLLAMA_UP):
            gauge.labels(settings.gpu_id).set(1 if status.reachable else 0)
        MODEL_PRESENT.labels(settings.gpu_id).set(1 if present else 0)
        if not status.reachable:
            self.status.update(warmed=False, detail=status.detail)
        elif not present:
            hint = pull_hint(settings.model_name) if settings.model_protocol == "ollama" else "see GET /v1/models"
            self.status.update(warmed=False, detail=f"model {settings.model_name} missing at {url}: {hint}")
        elif settings.model_protocol == "openai":  # the server loaded its model at start: nothing to warm
            self.status.update(warmed=True, detail=status.detail or "ready")
        elif not self.status["warmed"]:
            await self.warm_up()

    async def warm_up(self) -> None:
        settings = self.settings
        started = time.monotonic()
        options = settings.round_options()
        warmed, detail = await warm_up(self.http, settings.model_endpoint(), settings.model_name, options)
        self.status.update(warmed=warmed, detail=detail)
        log.info(
            "model_warmed" if warmed else "model_warm_up_failed",
            model=settings.model_name,
            seconds=round(time.monotonic() - started, 3),
            options=options,
            detail=detail,
        )

    async def publish(self) -> None:
        """The status, once a slot process listens on the queues (RQ registered it): the API counts this worker
        as able to run rounds from then on."""
        self.status["heartbeat"] = time.time()
        try:
            names = self.slot_names()
            if not names or not await self.redis.exists(*(keys.rq_worker_key(name) for name in names)):
                return
            pipe = self.redis.pipeline(transaction=False)
            pipe.set(keys.worker_status_key(self.worker), json.dumps(self.status), ex=keys.STATUS_TTL)
            pipe.sadd(keys.WORKERS_SET, self.worker)
            await pipe.execute()
        except RedisError as exc:  # Redis restarting: keep trying
            log.warning("status_publish_failed", error=str(exc))

    async def withdraw(self) -> None:
        with contextlib.suppress(RedisError):
            await self.redis.delete(keys.worker_status_key(self.worker))
            await self.redis.srem(keys.WORKERS_SET, self.worker)


@dataclass
class SlotProcesses:
    """The WORKER_SLOTS slot processes: started, restarted when one dies (unless stopping or --burst), signalled."""

    worker: str
    slots: int
    burst: bool
    metrics_dir: str
    procs: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)  # slot → its process
    names: dict[int, str] = field(default_factory=dict)  # slot → its process's RQ worker name
    died: dict[int, float] = field(default_factory=dict)  # slot → when its process died (monotonic)
    stopping: bool = False
    failed: bool = False
    _serial: int = 0

    def start(self) -> None:
        for slot in range(self.slots):
            self._spawn(slot)

    def _spawn(self, slot: int) -> None:
        self._serial += 1
        name = f"{self.worker}.{slot}.{self._serial}"  # RQ refuses a name whose dead owner's key has not expired
        self.names[slot] = name
        cmd = [sys.executable, "-P", "-m", "agent.queue.worker", "--slot", name, "--parent", str(os.getpid())]
        env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": self.metrics_dir}  # read when prometheus_client loads
        self.procs[slot] = subprocess.Popen([*cmd, *(["--burst"] if self.burst else [])], env=env)

    def check(self) -> None:
        """Reap the slot processes that ended; start again those that died while the worker runs."""
        for slot, proc in list(self.procs.items()):
            code = proc.poll()
            if code is None:
                continue
            del self.procs[slot]
            mark_process_dead(proc.pid, self.metrics_dir)  # type: ignore[no-untyped-call]
            if code != 0:
                self.failed = self.failed or self.burst or self.stopping
                log.warning("slot_process_died", slot=slot, pid=proc.pid, exit_code=code)
            if not (self.stopping or self.burst):
                self.died[slot] = time.monotonic()
        for slot, when in list(self.died.items()):
            if not self.stopping and time.monotonic() - when >= RESTART_AFTER:
                del self.died[slot]
                self._spawn(slot)

    def signal(self) -> None:
        """SIGTERM to every slot process: the first is a warm shutdown, one more a cold one (RQ's rule)."""
        self.stopping = True
        self.died.clear()
        for proc in self.procs.values():
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)

    @property
    def done(self) -> bool:
        return not self.procs and not self.died


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


def slot_work(name: str, parent: int, burst: bool) -> int:
    """One slot process: RQ's SimpleWorker named `name`, running one round at a time on this process's runtime."""
    settings = get_settings()
    configure(settings.log_level, service="agent-worker")
    die_with(parent)
    try:
        verifier = RoundVerifier(settings.round_verify_secret(), max_age=settings.queue_timeout_seconds + 60)
    except ValueError as exc:
        raise cli.UsageError(str(exc)) from exc
    conn = connect(settings)
    rt = jobs.start_runtime(settings, name)
    worker = rq_adapter.round_worker(conn, name, verifier, settings.worker_host())
    try:
        worker.work(burst=burst, logging_level="DEBUG" if settings.log_level.upper() == "DEBUG" else "WARNING")
    finally:
        jobs.stop_runtime(rt)
        conn.close()
    return 0


def serve_metrics(settings: Settings, metrics_dir: str) -> None:
    """One /metrics for the worker: its slot processes' metrics (prometheus_client's multiprocess files; the
    gauges say how they combine, agent.metrics) and this process's model probes."""
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=metrics_dir)  # type: ignore[no-untyped-call]
    registry.register(MODEL_UP)
    registry.register(OLLAMA_UP)
    registry.register(MODEL_PRESENT)
    start_http_server(settings.worker_metrics_port, addr=settings.worker_metrics_host, registry=registry)


async def supervise(settings: Settings, wid: str, slots: SlotProcesses) -> int:
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, slots.signal)
    redis = aioredis.Redis.from_url(
        settings.redis_url, **connection_options(settings), socket_timeout=5, socket_connect_timeout=2
    )
    http = httpx.AsyncClient(
        timeout=httpx.Timeout(settings.round_timeout_seconds, connect=5.0), headers=settings.model_headers()
    )
    reporter = StatusReporter(settings, wid, redis, http, lambda: [slots.names[k] for k in slots.procs])
    status = asyncio.create_task(reporter.run())
    try:
        slots.start()
        while not slots.done:
            await asyncio.sleep(CHECK_EVERY)
            slots.check()
    finally:
        reporter.stopped.set()
        await asyncio.wait({status}, timeout=STOP_WAIT)  # a probe under way ends within its HTTP timeout
        status.cancel()  # past that; asyncio.run waits for it, and the flag ends its loop even if this is lost
        await reporter.withdraw()
        await http.aclose()
        await redis.aclose()
    return 1 if slots.failed else 0


def work(burst: bool) -> int:
    settings = get_settings()
    configure(settings.log_level, service="agent-worker")
    try:
        RoundVerifier(settings.round_verify_secret(), max_age=0)  # no key: one line, before any slot process starts
    except ValueError as exc:
        raise cli.UsageError(str(exc)) from exc
    connect(settings).close()  # Redis down at start: one line naming it, before any slot process starts
    metrics_dir = tempfile.mkdtemp(prefix="agent-worker-metrics-")
    try:
        serve_metrics(settings, metrics_dir)
        wid = jobs.worker_id(settings)
        slots = SlotProcesses(wid, settings.worker_slots, burst, metrics_dir)
        log.info(
            "worker_started",
            worker=wid,
            gpu_id=settings.gpu_id,
            model_url=settings.model_endpoint(),
            protocol=settings.model_protocol,
            slots=settings.worker_slots,
            metrics_port=settings.worker_metrics_port,
        )
        code = asyncio.run(supervise(settings, wid, slots))
        log.info("worker_stopped", worker=wid)
        return code
    finally:
        shutil.rmtree(metrics_dir, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = cli.parser("agent-worker", __doc__.splitlines()[0])
    parser.add_argument("--burst", action="store_true", help="exit once the queues are empty (tests, benches)")
    parser.add_argument("--slot", metavar="NAME", help=argparse.SUPPRESS)  # a slot process, with its RQ name
    parser.add_argument("--parent", type=int, help=argparse.SUPPRESS)  # the slot process's agent-worker
    args = parser.parse_args(argv)
    if args.slot is not None:
        if args.parent is None:
            parser.error("--slot needs --parent")
        return cli.run("agent-worker", lambda: slot_work(args.slot, args.parent, args.burst))
    return cli.run("agent-worker", lambda: work(args.burst))


if __name__ == "__main__":
    raise SystemExit(main())
