"""Several GPU hosts (issue 15): agent-api + Redis on one host, two worker hosts, each in its own network namespace.

The queue host runs redis-server (password required), mcp-server and agent-api; each worker host runs an
agent-worker and a scripted Ollama, and joins through the queue host's Redis with the password from a file.
A worker host loses its network mid-round (tests/support/netns.py: its cable is pulled, its processes do
not know): the request ends with a clear error, or is retried on the other host when no token had been
sent, within seconds; the requests after it are answered by the other host, and the host rejoins by itself
when its network is back.
"""

from __future__ import annotations

import json
import secrets
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from agent.queue.keys import WORKERS_SET, worker_status_key
from tests.fakes.control import SOURCE as FAKE_OLLAMA
from tests.fakes.control import FakeOllama
from tests.integration.conftest import McpServer, agent_env
from tests.support import netns, sse
from tests.support.procs import VENV_BIN, Proc, start, wait_until
from tests.support.readiness import details

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(netns.unavailable() is not None, reason=str(netns.unavailable())),
]

REDIS_PORT, API_PORT, MCP_PORT, OLLAMA_PORT = 6379, 8000, 8001, 11434  # each host has its own ports
WORKER_HOSTS = ("host-a", "host-b")
SLOW = {"content": " ".join(f"word{i}" for i in range(80)), "token_delay": 0.1}


@dataclass
class Cluster:
    hosts: dict[str, netns.Host]
    password: str
    fakes: dict[str, FakeOllama] = field(default_factory=dict)
    procs: list[Proc] = field(default_factory=list)

    @property
    def queue(self) -> netns.Host:
        return self.hosts["queue"]

    @property
    def api(self) -> str:
        return f"http://{self.queue.address}:{API_PORT}"

    def redis(self, password: str | None = None) -> redis.Redis:
        return redis.Redis(
            host=self.queue.address, port=REDIS_PORT, password=password, decode_responses=True, socket_timeout=5
        )

    def live_gpus(self) -> set[str]:
        client = self.redis(self.password)
        raw = [client.get(worker_status_key(str(w))) for w in client.smembers(WORKERS_SET)]
        return {json.loads(r)["gpu_id"] for r in raw if r}

    def generating(self) -> list[str]:
        """The worker hosts whose Ollama is generating right now."""
        return [name for name, fake in self.fakes.items() if fake.stats()["active"] > 0]

    def api_log(self) -> str:
        return self.procs[2].output()  # redis-server, mcp-server, agent-api: started in this order

    def outputs(self) -> str:
        return "\n".join(p.output() for p in self.procs)


def redis_cmd(host: netns.Host, password: str, workdir: Path) -> list[str]:
    binary = shutil.which("redis-server") or "/usr/bin/redis-server"
    return host.run(
        binary, "--port", str(REDIS_PORT), "--bind", host.address, "127.0.0.1", "--requirepass", password,
        "--save", "", "--appendonly", "no", "--dir", str(workdir),
    )  # fmt: skip


def start_queue_host(host: netns.Host, password: str, tmp: Path, procs: list[Proc]) -> None:
    """redis-server, mcp-server and agent-api, the main server's part of the stack, on `host`."""
    client = redis.Redis(host=host.address, port=REDIS_PORT, password=password, socket_timeout=2)
    procs.append(start(redis_cmd(host, password, tmp), ready=lambda: bool(client.ping())))
    token = secrets.token_urlsafe(24)
    (tmp / "files").mkdir()
    mcp_env = {
        "MCP_HOST": "127.0.0.1",
        "MCP_PORT": str(MCP_PORT),
        "MCP_TOKEN": token,
        "FILES_ROOT": str(tmp / "files"),
        "DATA_DIR": str(tmp),
    }
    mcp_ready = host.run(
        "python3", "-c", f"import urllib.request as u; u.urlopen('http://127.0.0.1:{MCP_PORT}/healthz')"
    )
    procs.append(start(host.run(str(VENV_BIN / "mcp-server")), env=mcp_env, ready=lambda: _ok(mcp_ready), timeout=60))
    mcp = McpServer(f"http://127.0.0.1:{MCP_PORT}/mcp", token, tmp / "files", tmp, procs[-1])
    env = agent_env(
        "http://127.0.0.1:1",  # the API never calls a model itself: rounds go through the queue
        mcp,
        API_PORT,
        AGENT_HOST="0.0.0.0",
        MODEL_BACKEND="queue",
        REDIS_URL=f"redis://127.0.0.1:{REDIS_PORT}/0",
        REDIS_PASSWORD_FILE=str(tmp / "redis-password"),
        THINK_HOLDBACK_MODELS="",
        EXTRA_MODELS="",
        RATE_LIMIT_PER_MINUTE="600",  # its window lives in the same Redis: the limiter needs the password too
    )
    api = f"http://{host.address}:{API_PORT}/healthz"
    procs.append(start(host.run(str(VENV_BIN / "agent-api")), env=env, ready_url=api, timeout=60))


def _ok(cmd: list[str]) -> bool:
    return subprocess.run(cmd, capture_output=True, check=False).returncode == 0


def start_worker_host(host: netns.Host, queue: netns.Host, password_file: Path, procs: list[Proc]) -> FakeOllama:
    """A scripted Ollama and an agent-worker that joins the queue host's Redis; returns the Ollama."""
    url = f"http://{host.address}:{OLLAMA_PORT}"
    fake_cmd = host.run(str(VENV_BIN / "python"), str(FAKE_OLLAMA), "--host", "0.0.0.0", "--port", str(OLLAMA_PORT))
    procs.append(start(fake_cmd, ready_url=f"{url}/api/version"))
    fake = FakeOllama(url, procs[-1])
    env = {
        "REDIS_URL": f"redis://{queue.address}:{REDIS_PORT}/0",  # no password in the URL: it is in the file
        "REDIS_PASSWORD_FILE": str(password_file),
        "OLLAMA_URL": f"http://127.0.0.1:{OLLAMA_PORT}",
        "MODEL_NAME": "qwen3:4b",
        "GPU_ID": f"{host.name}-gpu0",
        "THINK_HOLDBACK_MODELS": "",
    }
    procs.append(start(host.run(str(VENV_BIN / "agent-worker")), env=env))
    return fake


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    password = secrets.token_hex(16)
    password_file = tmp_path / "redis-password"
    password_file.write_text(password + "\n")
    with netns.hosts("queue", *WORKER_HOSTS) as hosts:
        found = Cluster(hosts, password)
        try:
            start_queue_host(hosts["queue"], password, tmp_path, found.procs)
            for name in WORKER_HOSTS:
                found.fakes[name] = start_worker_host(hosts[name], hosts["queue"], password_file, found.procs)
            wait_until(lambda: found.live_gpus() == {f"{n}-gpu0" for n in WORKER_HOSTS}, 30, what="both worker hosts")
            yield found
        finally:
            for proc in reversed(found.procs):
                proc.stop()


def stream_chat(api: str, text: str, sink: list[dict[str, Any]], done: threading.Event) -> None:
    body = {"model": "qwen3:4b", "stream": True, "messages": [{"role": "user", "content": text}]}
    sse.collect(f"{api}/v1/chat/completions", body, sink, done)


def ask(api: str, text: str) -> str:
    body = {"model": "qwen3:4b", "messages": [{"role": "user", "content": text}]}
    reply = httpx.post(f"{api}/v1/chat/completions", json=body, timeout=60)
    assert reply.status_code == 200, reply.text
    return str(reply.json()["choices"][0]["message"]["content"])


def script_hosts(cluster: Cluster, **replies: dict[str, Any]) -> None:
    """Each host answers with `replies[name]`, or by default with a line naming itself."""
    for name, fake in cluster.fakes.items():
        fake.reset()
        fake.script({"default": replies.get(name, {"content": f"answered by {name}"})})


def test_the_queue_hosts_redis_refuses_a_client_without_the_password(cluster: Cluster) -> None:
    with pytest.raises(redis.AuthenticationError):
        cluster.redis().ping()
    with pytest.raises(redis.AuthenticationError):
        cluster.redis("not-the-password").ping()
    assert cluster.live_gpus() == {"host-a-gpu0", "host-b-gpu0"}  # both workers joined with the password file


def test_a_host_lost_mid_round_ends_that_request_clearly_and_the_other_host_serves_the_rest(cluster: Cluster) -> None:
    script_hosts(cluster, **{name: SLOW for name in WORKER_HOSTS})
    events: list[dict[str, Any]] = []
    done = threading.Event()
    threading.Thread(target=stream_chat, args=(cluster.api, "long answer", events, done), daemon=True).start()
    wait_until(lambda: any(_text(e) for e in events), timeout=30, what="first streamed token")
    (victim,) = cluster.generating()
    survivor = next(name for name in WORKER_HOSTS if name != victim)
    cluster.hosts[victim].cut_off()
    cut = time.monotonic()
    assert done.wait(30), "the request hung after its worker host went away"
    took = time.monotonic() - cut
    errors = [e for e in events if "error" in e]
    assert errors, f"the stream ended without an error event: {events[-3:]}"
    assert errors[0]["error"]["code"] == "dependency_unavailable", errors  # the user's message stays plain;
    assert "agent-worker stopped mid-round" in cluster.api_log()  # the operator's log names what happened
    assert not any(_finish(e) == "stop" for e in events), "a cut-off answer was presented as complete"
    print(f"host {victim} cut off mid-round: the request ended with an error after {took:.1f} s")

    cluster.fakes[survivor].script({"default": {"content": f"answered by {survivor}"}})
    wait_until(lambda: cluster.live_gpus() == {f"{survivor}-gpu0"}, timeout=15, what="the lost host's status expiring")
    for i in range(4):
        assert ask(cluster.api, f"later question {i}") == f"answered by {survivor}"
    readyz = str(details(cluster.api, timeout=10)["model"])
    assert f"{survivor}-gpu0" in readyz and f"{victim}-gpu0" not in readyz
    assert cluster.password not in cluster.outputs() + readyz

    cluster.hosts[victim].reconnect()  # the host comes back: its worker rejoins by itself and takes rounds again
    wait_until(lambda: len(cluster.live_gpus()) == 2, timeout=30, what="the lost host rejoining")
    script_hosts(cluster)
    wait_until(lambda: ask(cluster.api, "back again") == f"answered by {victim}", 30, what=f"a round on {victim}")


def _text(event: dict[str, Any]) -> str:
    choices = event.get("choices") or [{}]
    return str(choices[0].get("delta", {}).get("content") or "")


def _finish(event: dict[str, Any]) -> str | None:
    choices = event.get("choices") or [{}]
    finish: str | None = choices[0].get("finish_reason")
    return finish


def test_a_host_lost_before_its_first_token_has_the_round_retried_on_the_other_host(cluster: Cluster) -> None:
    script_hosts(cluster, **{name: {"content": "never sent", "first_token_delay": 60} for name in WORKER_HOSTS})
    answer: list[str] = []
    asking = threading.Thread(target=lambda: answer.append(ask(cluster.api, "retry me")), daemon=True)
    asking.start()
    wait_until(lambda: len(cluster.generating()) == 1, timeout=30, what="a host generating")
    (victim,) = cluster.generating()
    survivor = next(name for name in WORKER_HOSTS if name != victim)
    cluster.fakes[survivor].script({"default": {"content": f"answered by {survivor}"}})
    cluster.hosts[victim].cut_off()
    cut = time.monotonic()
    asking.join(60)
    assert answer == [f"answered by {survivor}"], cluster.outputs()[-3000:]
    print(f"host {victim} cut off before its first token: answered by {survivor} after {time.monotonic() - cut:.1f} s")


def test_an_idle_host_lost_leaves_the_queue_to_the_other_host(cluster: Cluster) -> None:
    # The lost host's worker may still be blocked in BLPOP on Redis, which then hands the next round to a
    # connection nobody reads: the API sees it leave the queue unannounced and runs it again on the other host.
    script_hosts(cluster)
    assert {ask(cluster.api, f"warm-up {i}") for i in range(4)} <= {"answered by host-a", "answered by host-b"}
    cluster.hosts["host-a"].cut_off()
    for i in range(4):
        assert ask(cluster.api, f"after the loss {i}") == "answered by host-b"
    retried = cluster.api_log().count("round_retried")
    print(f"idle host-a cut off: 4 of 4 later requests answered by host-b ({retried} retried once)")
