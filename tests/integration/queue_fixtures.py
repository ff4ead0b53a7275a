"""Processes for the GPU-queue tests: a private redis-server, the scripted Ollama, agent-worker processes.

Test modules bind the fixtures by assignment (`queue_workers = queue_fixtures.queue_workers`, and the two it
depends on), which pytest finds like any module-level fixture.
"""

from __future__ import annotations

import contextlib
import json
import signal
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import redis

from agent.backends.base import RoundRequest, TextDelta
from agent.queue.client import QueueBackend
from agent.queue.keys import RQ_QUEUE_KEYS, WORKERS_SET, worker_status_key
from agent.settings import Settings
from tests.fakes.control import FakeOllama, fake_ollama_process
from tests.support.procs import VENV_BIN, Proc, free_port, redis_server_cmd, start, wait_until
from tests.support.redis_users import HARNESS, RedisUsers


@dataclass
class RedisServer:
    """A private redis-server that tests may stop and restart on the same port and data dir. With `users` it
    loads the shipped ACL (tests/support/redis_users.py): the API then connects as `api`, workers as `worker-main`,
    the tests' own client as the harness user."""

    port: int
    workdir: Path
    proc: Proc | None = None
    _client: redis.Redis | None = None
    users: RedisUsers | None = None

    @property
    def url(self) -> str:
        """What the API connects with."""
        return self.users.url(self.port, "api") if self.users else f"redis://127.0.0.1:{self.port}/0"

    @property
    def worker_url(self) -> str:
        return self.users.url(self.port, "worker-main") if self.users else self.url

    def client(self) -> redis.Redis:
        """The tests' client of this server (one per start, closed when it stops: no connection left behind)."""
        if self._client is None:
            user, password = (HARNESS, self.users.password(HARNESS)) if self.users else (None, None)
            self._client = redis.Redis(
                port=self.port, username=user, password=password, decode_responses=True, socket_timeout=5
            )
        return self._client

    def start(self) -> None:
        cmd = redis_server_cmd(self.port, self.workdir)
        if self.users is not None:
            cmd += ["--aclfile", str(self.users.acl_file)]
        self.proc = start(cmd, ready=lambda: bool(self.client().ping()))

    def kill(self) -> None:
        """SIGKILL, as a crash or `docker kill` does: nothing is said to the clients (AOF keeps what it synced)."""
        assert self.proc is not None
        self.proc.popen.send_signal(signal.SIGKILL)
        self.proc.popen.wait()
        self.proc = None
        self.stop()

    def stop(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
        if self.proc is not None:
            self.proc.stop()
            self.proc = None


@dataclass
class Workers:
    """agent-worker processes started by one test; all are stopped at its end."""

    redis: RedisServer
    fake: FakeOllama
    procs: list[Proc] = field(default_factory=list)

    @property
    def ollama_url(self) -> str:
        return self.fake.url

    def start(self, gpu_id: str = "gpu0", **env: str) -> Proc:
        full_env = {
            "REDIS_URL": self.redis.worker_url,
            "OLLAMA_URL": self.ollama_url,
            "MODEL_NAME": "qwen3:4b",
            "GPU_ID": gpu_id,
            "WORKER_METRICS_PORT": str(free_port()),
            "LOG_LEVEL": "INFO",
            "THINK_HOLDBACK_MODELS": "",
            **env,
        }
        before = {w["worker"] for w in self.statuses()}  # a killed worker's status lingers a few seconds
        proc = start(
            [str(VENV_BIN / "agent-worker")],
            env=full_env,
            timeout=30,
            ready=lambda: any(w["worker"] not in before for w in self.statuses()),
        )
        self.procs.append(proc)
        return proc

    def statuses(self) -> list[dict[str, Any]]:
        """Status of each live worker (its key expires a few seconds after the worker stops)."""
        client = self.redis.client()  # decode_responses: members and values are str
        raw = [client.get(worker_status_key(str(w))) for w in client.smembers(WORKERS_SET)]
        return [json.loads(r) for r in raw if r]

    def kill(self, proc: Proc) -> None:
        proc.kill(signal.SIGKILL)

    def stop_all(self) -> None:
        for proc in self.procs:
            proc.stop()


def settings_for(redis_url: str, ollama_url: str, **overrides: Any) -> Settings:
    return Settings(
        redis_url=redis_url,
        ollama_url=ollama_url,
        model_name="qwen3:4b",
        model_backend="queue",
        think_holdback_models="",
        **overrides,
    )


@contextlib.contextmanager
def shipped_acl_redis(tmp_path_factory: pytest.TempPathFactory, host: str) -> Iterator[RedisServer]:
    """A queue Redis with the users init-secrets ships and one worker host added as scripts/worker-host does."""
    users = RedisUsers.generate(tmp_path_factory.mktemp("vault"))
    users.add_host(host)
    server = RedisServer(free_port(), tmp_path_factory.mktemp("redis"), users=users)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def login_as(server: RedisServer, user: str) -> redis.Redis:
    """A client of `server` logged in as one of its shipped users (a stolen password, in the attack tests)."""
    assert server.users is not None
    return redis.Redis(port=server.port, username=user, password=server.users.password(user), socket_timeout=5)


@pytest.fixture(scope="module")
def queue_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(free_port(), tmp_path_factory.mktemp("redis"))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def queue_fake() -> Iterator[FakeOllama]:
    with fake_ollama_process() as ollama:
        yield ollama


@pytest.fixture
def queue_workers(queue_redis: RedisServer, queue_fake: FakeOllama) -> Iterator[Workers]:
    """A clean Redis and fake for each test; the workers the test starts are stopped at its end."""
    if queue_redis.proc is None:  # a previous test stopped it
        queue_redis.start()
    queue_redis.client().flushall()
    queue_fake.reset()
    group = Workers(queue_redis, queue_fake)
    yield group
    group.stop_all()


def wait_for_worker_count(group: Workers, count: int, timeout: float = 15.0) -> None:
    wait_until(lambda: len(group.statuses()) == count, timeout=timeout, what=f"{count} live agent-worker(s)")


@contextlib.asynccontextmanager
async def open_backend(group: Workers, **overrides: Any) -> AsyncIterator[QueueBackend]:
    backend = QueueBackend(settings_for(group.redis.url, group.ollama_url, **overrides))
    try:
        yield backend
    finally:
        await backend.aclose()


def request(text: str = "hello", round_no: int = 1, request_id: str = "") -> RoundRequest:
    return RoundRequest(
        model="qwen3:4b",
        messages=[{"role": "user", "content": text}],
        tools=None,
        options={"num_ctx": 8192, "temperature": 0.0},
        request_id=request_id or f"req-{text}",
        round=round_no,
    )


async def answer(backend: QueueBackend, req: RoundRequest) -> str:
    """Run one round to the end; return its text."""
    return "".join([e.text async for e in backend.stream_round(req) if isinstance(e, TextDelta)])


def queued(group: Workers) -> list[str]:
    client = group.redis.client()
    return [str(job_id) for key in RQ_QUEUE_KEYS for job_id in client.lrange(key, 0, -1)]
