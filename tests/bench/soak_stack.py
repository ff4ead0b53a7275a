"""The stack a chaos soak runs against: every part a real process on loopback that can be SIGKILLed and started again.

Parts: redis-server (AOF everysec, noeviction: the queue's settings), the scripted Ollama, mcp-server, agent-api
(the GPU queue, as shipped) and agent-worker. Each keeps its port and data across restarts, as a compose service
with `restart: unless-stopped` does; a kill takes the part's whole process group (a container's processes).
agent-api's app process can also be killed alone (`crash_app`): its supervisor starts it again.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import redis

from agent.queue import keys
from agent.security.audit import chain_files
from tests.support import round_keys
from tests.support.procs import REPO, VENV_BIN, free_port, redis_server_cmd, wait_until

MODEL = "qwen3:4b"
START_TIMEOUT = 180.0  # a cold Python start on a loaded 2-core host has taken over 30 s


@dataclass
class Part:
    """One process of the stack: how to start it and when it is ready."""

    name: str
    cmd: list[str]
    env: dict[str, str]
    ready: Callable[[], bool]
    log: Path
    popen: subprocess.Popen[bytes] | None = None
    starts: int = 0

    def start(self) -> float:
        """Start it and wait until it is ready; returns the time it was."""
        env = {**os.environ, "PATH": f"{VENV_BIN}:{os.environ.get('PATH', '')}", **self.env}
        with self.log.open("ab") as out:
            self.popen = subprocess.Popen(
                self.cmd, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=REPO, start_new_session=True
            )
        self.starts += 1
        popen = self.popen
        wait_until(lambda: popen.poll() is None and self.ready(), timeout=START_TIMEOUT, what=f"{self.name} ready")
        return time.time()

    def kill(self) -> None:
        """SIGKILL the part's process group, as `docker kill` does to a container."""
        if self.popen is not None and self.popen.poll() is None:
            os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait(timeout=30)

    def stop(self) -> None:
        if self.popen is not None and self.popen.poll() is None:
            os.killpg(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()

    def app_pid(self) -> int | None:
        """agent-api's app process: the child of its supervisor (agent.api.supervisor), None while there is none."""
        if self.popen is None or self.popen.poll() is not None:
            return None
        return next((pid for pid in _group(self.popen.pid) if _parent(pid) == self.popen.pid), None)

    def rss_mb(self) -> float:
        """Resident memory of the part's processes (its group), in MB."""
        if self.popen is None or self.popen.poll() is not None:
            return 0.0
        total = 0
        for pid in _group(self.popen.pid):
            try:
                status = Path(f"/proc/{pid}/status").read_text()
            except OSError:
                continue
            total += next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0)
        return total / 1024


def _parent(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])  # after "pid (comm) state": the parent's pid


def _group(pgid: int) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.getpgid(int(entry.name)) == pgid:
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


@dataclass
class SoakStack:
    """The five parts, their ports and the shared state a report reads (audit log, Redis, the fake's stats)."""

    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="soak-")))
    slots: int = 1
    extra_env: dict[str, str] = field(default_factory=dict)
    parts: dict[str, Part] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.ports = {name: free_port() for name in ("redis", "ollama", "mcp", "api", "metrics")}
        token = secrets.token_urlsafe(24)
        self.api_url = f"http://127.0.0.1:{self.ports['api']}"
        self.ollama_url = f"http://127.0.0.1:{self.ports['ollama']}"
        self.redis_url = f"redis://127.0.0.1:{self.ports['redis']}/0"
        self.audit_dir = self.workdir / "audit"
        for sub in ("redis", "files", "mcp-data", "logs"):
            (self.workdir / sub).mkdir(parents=True, exist_ok=True)
        mcp_url = f"http://127.0.0.1:{self.ports['mcp']}"
        self._add("redis", redis_server_cmd(self.ports["redis"], self.workdir / "redis"), {}, self._redis_up)
        self._add(
            "ollama",
            ["python", "-m", "tests.fakes.fake_ollama", "--host", "127.0.0.1", "--port", str(self.ports["ollama"])],
            {},
            lambda: _http_ok(f"{self.ollama_url}/api/version"),
        )
        mcp_env = {
            "MCP_HOST": "127.0.0.1",
            "MCP_PORT": str(self.ports["mcp"]),
            "MCP_TOKEN": token,
            "FILES_ROOT": str(self.workdir / "files"),
            "DATA_DIR": str(self.workdir / "mcp-data"),
            "LOG_LEVEL": "WARNING",
        }
        self._add("mcp", ["mcp-server"], mcp_env, lambda: _http_ok(f"{mcp_url}/healthz"))
        api_env = {
            "AGENT_HOST": "127.0.0.1",
            "AGENT_PORT": str(self.ports["api"]),
            "MODEL_NAME": MODEL,
            "MCP_URL": f"{mcp_url}/mcp",
            "MCP_TOKEN": token,
            "REDIS_URL": self.redis_url,
            "MODEL_BACKEND": "queue",
            "AGENT_AUTH": "none",  # clients are anonymous; the rate limiter still runs on Redis
            "ANONYMOUS_ROLE": "admin",
            "RATE_LIMIT_PER_MINUTE": "100000",
            "AUDIT_DIR": str(self.audit_dir),
            "LOG_LEVEL": "WARNING",
            "ROUND_SIGNING_KEY": round_keys.signing_key(),  # as secrets-init gives agent-api its half of the pair
            **self.extra_env,
        }
        self._add("api", ["agent-api"], api_env, lambda: _http_ok(f"{self.api_url}/healthz"))
        worker_env = {
            "REDIS_URL": self.redis_url,
            "OLLAMA_URL": self.ollama_url,
            "MODEL_NAME": MODEL,
            "GPU_ID": "gpu0",
            "WORKER_SLOTS": str(self.slots),
            "WORKER_METRICS_PORT": str(self.ports["metrics"]),
            "LOG_LEVEL": "WARNING",
            "ROUND_VERIFY_KEY": round_keys.verify_key(),  # ... and agent-worker the other
            **self.extra_env,
        }
        self._add("worker", ["agent-worker"], worker_env, self._worker_up)

    def _add(self, name: str, cmd: list[str], env: dict[str, str], ready: Callable[[], bool]) -> None:
        self.parts[name] = Part(name, cmd, env, ready, self.workdir / "logs" / f"{name}.log")

    def redis(self) -> redis.Redis:
        return redis.Redis(port=self.ports["redis"], decode_responses=True, socket_timeout=5)

    def _redis_up(self) -> bool:
        with self.redis() as client:
            return bool(client.ping())

    def _worker_up(self) -> bool:
        """A process of this start published its worker status (a killed one's lingers a few seconds)."""
        popen = self.parts["worker"].popen
        group = set(_group(popen.pid)) if popen is not None else set()
        with self.redis() as client:
            statuses = [client.get(keys.worker_status_key(w)) for w in client.smembers(keys.WORKERS_SET)]
        return any(s and json.loads(s).get("pid") in group for s in statuses)

    def start(self) -> None:
        for name in ("redis", "ollama", "mcp", "api", "worker"):
            self.parts[name].start()

    def stop(self) -> None:
        for name in ("worker", "api", "mcp", "ollama", "redis"):
            self.parts[name].stop()

    def crash_app(self) -> float:
        """SIGKILL agent-api's app process alone (the OOM killer, a native crash) and wait until the process its
        supervisor starts instead answers; returns the time it did."""
        api = self.parts["api"]
        old = api.app_pid()
        assert old is not None, "agent-api has no app process"
        os.kill(old, signal.SIGKILL)

        def back() -> bool:
            new = api.app_pid()
            return new is not None and new != old and _http_ok(f"{self.api_url}/healthz")

        wait_until(back, timeout=START_TIMEOUT, what="agent-api's app process started again")
        return time.time()

    def script(self, **behaviour: object) -> None:
        httpx.post(f"{self.ollama_url}/_fake/script", json=behaviour, timeout=10).raise_for_status()

    def fake_stats(self) -> dict[str, int]:
        return dict(httpx.get(f"{self.ollama_url}/_fake/stats", timeout=10).json())

    def audit_records(self) -> int:
        # every file of the chain: a soak that crosses midnight rotates audit.jsonl to audit.jsonl.<first seq>
        return sum(1 for path in chain_files(self.audit_dir) for line in path.read_text().splitlines() if line.strip())

    def leftovers(self) -> dict[str, int]:
        """Queue state that should be empty once every request is over: slot locks, queued jobs, event streams."""
        with self.redis() as client:
            return {
                "slot_locks": sum(client.exists(k) for k in keys.gpu_slot_keys("main", "gpu0", self.slots)),
                "queued_jobs": sum(client.llen(k) for k in keys.RQ_QUEUE_KEYS),
            }


def _http_ok(url: str) -> bool:
    return httpx.get(url, timeout=2).status_code == 200


def netcut_unavailable() -> str | None:
    """Why this machine cannot cut a connection (the netcut fault), or None when it can."""
    if os.geteuid() != 0:
        return "the netcut fault needs root (iptables)"
    if shutil.which("iptables") is None:
        return "the netcut fault needs iptables"
    probe = subprocess.run(["iptables", "-w", "-n", "-L", "INPUT"], capture_output=True, text=True, check=False)
    return None if probe.returncode == 0 else f"iptables refused: {probe.stderr.strip()[:200]}"


@contextlib.contextmanager
def cut(port: int) -> Iterator[None]:
    """Drop every packet to `port` on loopback while inside: the connections to it stay open and go silent, new
    ones hang in their handshake, as a cable pulled between hosts looks (not a refusal: that is a restart)."""
    rule = ["INPUT", "-i", "lo", "-p", "tcp", "--dport", str(port), "-j", "DROP"]
    subprocess.run(["iptables", "-w", "-I", *rule], check=True)
    try:
        yield
    finally:
        subprocess.run(["iptables", "-w", "-D", *rule], check=True)
