"""A worker on another host reaching the queue's Redis over TLS, with the password from a file.

A real redis-server with `tls-port` and `tls-auth-clients yes` (Debian's build has TLS) on loopback, certificates
made by `openssl` for this test: a round runs through it; a worker without the CA, or with a wrong password,
stops at start with one line naming what to fix and never the password.
"""

from __future__ import annotations

import secrets
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

from agent.queue.client import QueueBackend
from agent.queue.keys import WORKERS_SET
from agent.settings import Settings
from tests.fakes.control import FakeOllama
from tests.integration import queue_fixtures
from tests.integration.queue_fixtures import answer, request
from tests.support import round_keys
from tests.support.procs import VENV_BIN, Proc, free_port, start

pytestmark = pytest.mark.integration
queue_fake = queue_fixtures.queue_fake


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_certs(folder: Path) -> None:
    """A CA, a server certificate for 127.0.0.1 and a client certificate, all signed by the CA."""
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", "1",
            "-subj", "/CN=local-agent test CA", cwd=folder)  # fmt: skip
    (folder / "server.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    for name, ext in (("server", ["-extfile", "server.ext"]), ("client", [])):
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
                "-subj", f"/CN={name}", cwd=folder)  # fmt: skip
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                "-out", f"{name}.crt", "-days", "1", *ext, cwd=folder)  # fmt: skip


@dataclass
class TlsRedis:
    port: int
    certs: Path
    password_file: Path
    proc: Proc | None = None

    @property
    def url(self) -> str:
        return f"rediss://127.0.0.1:{self.port}/0"

    def env(self) -> dict[str, str]:
        return {
            "REDIS_URL": self.url,
            "REDIS_PASSWORD_FILE": str(self.password_file),
            "REDIS_TLS_CA_FILE": str(self.certs / "ca.crt"),
            "REDIS_TLS_CERT_FILE": str(self.certs / "client.crt"),
            "REDIS_TLS_KEY_FILE": str(self.certs / "client.key"),
        }

    def client(self) -> redis.Redis:
        c = self.certs
        return redis.Redis.from_url(
            self.url,
            password=self.password_file.read_text().strip(),
            ssl_ca_certs=str(c / "ca.crt"),
            ssl_certfile=str(c / "client.crt"),
            ssl_keyfile=str(c / "client.key"),
            decode_responses=True,
        )


@pytest.fixture(scope="module")
def tls_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsRedis]:
    if shutil.which("openssl") is None:
        pytest.fail("openssl is missing: scripts/services installs it")
    certs, data = tmp_path_factory.mktemp("certs"), tmp_path_factory.mktemp("redis-tls")
    make_certs(certs)
    password_file = certs / "redis-password"
    password_file.write_text(secrets.token_hex(16) + "\n")
    port = free_port()
    cmd = [shutil.which("redis-server") or "/usr/bin/redis-server", "--port", "0", "--tls-port", str(port),
           "--bind", "127.0.0.1", "--tls-cert-file", str(certs / "server.crt"),
           "--tls-key-file", str(certs / "server.key"), "--tls-ca-cert-file", str(certs / "ca.crt"),
           "--tls-auth-clients", "yes", "--requirepass", password_file.read_text().strip(),
           "--save", "", "--dir", str(data)]  # fmt: skip
    server = TlsRedis(port, certs, password_file)
    server.proc = start(cmd, ready=lambda: bool(server.client().ping()))
    yield server
    server.proc.stop()


def worker_env(tls: TlsRedis, fake: FakeOllama, **extra: str) -> dict[str, str]:
    return {
        **tls.env(),
        "OLLAMA_URL": fake.url,
        "MODEL_NAME": "qwen3:4b",
        "GPU_ID": "tls-host-gpu0",
        "WORKER_METRICS_PORT": str(free_port()),
        "THINK_HOLDBACK_MODELS": "",
        **extra,
    }


async def test_a_round_runs_over_tls_with_the_password_from_a_file(tls_redis: TlsRedis, queue_fake: FakeOllama) -> None:
    queue_fake.reset()
    queue_fake.script({"default": {"content": "answered over TLS"}})
    client = tls_redis.client()
    worker = start(
        [str(VENV_BIN / "agent-worker")],
        env=worker_env(tls_redis, queue_fake),
        ready=lambda: bool(client.smembers(WORKERS_SET)),
    )
    env = tls_redis.env()
    settings = Settings(
        redis_url=env["REDIS_URL"],
        redis_password_file=Path(env["REDIS_PASSWORD_FILE"]),
        redis_tls_ca_file=Path(env["REDIS_TLS_CA_FILE"]),
        redis_tls_cert_file=Path(env["REDIS_TLS_CERT_FILE"]),
        redis_tls_key_file=Path(env["REDIS_TLS_KEY_FILE"]),
        model_name="qwen3:4b",
        think_holdback_models="",
    )
    backend = QueueBackend(settings)
    try:
        assert await answer(backend, request("over tls")) == "answered over TLS"
        assert (await backend.status()).reachable
    finally:
        await backend.aclose()
        worker.stop()
    assert tls_redis.password_file.read_text().strip() not in worker.output()


@pytest.mark.parametrize(
    ("case", "change", "expected"),
    [
        ("no CA", {"REDIS_TLS_CA_FILE": ""}, "The TLS handshake failed"),
        ("no client certificate", {"REDIS_TLS_CERT_FILE": "", "REDIS_TLS_KEY_FILE": ""}, "The TLS handshake failed"),
        ("wrong password", {"REDIS_PASSWORD": "not-the-password"}, "Redis refused this process's credentials"),
    ],
)
def test_a_worker_that_cannot_join_says_why_in_one_line(
    tls_redis: TlsRedis, queue_fake: FakeOllama, case: str, change: dict[str, str], expected: str
) -> None:
    env = {k: v for k, v in worker_env(tls_redis, queue_fake, **change).items() if v}
    full = {"PATH": f"{VENV_BIN}:/usr/bin:/bin", **round_keys.env(), **env}  # the shipped worker has its key
    done = subprocess.run([str(VENV_BIN / "agent-worker")], env=full, capture_output=True, text=True, timeout=30)
    assert done.returncode == 2, done
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert f"Redis unreachable at rediss://127.0.0.1:{tls_redis.port}/0" in done.stderr and expected in done.stderr
    assert tls_redis.password_file.read_text().strip() not in done.stderr + done.stdout
