"""Regression (issue 28, item 4): direct mode on an OpenAI-protocol server had no total deadline — a server that
kept the stream open held the request 300 s with no 504, then the route died with a CancelledError traceback.

ROUND_TIMEOUT_SECONDS now bounds every round the same way: both model-server protocols (Ollama, OpenAI), direct
and queue mode, against a server that never answers, one that stops mid-stream and one that trickles tokens
(each read on time, the whole far too long: only a total deadline stops it). A client that gives up first
leaves no traceback either. The scripted servers' replies are plumbing, never model accuracy.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.integration import queue_fixtures
from tests.integration.conftest import FakeOllama, FakeOpenAI, McpServer, agent_env, fake_openai
from tests.integration.queue_fixtures import RedisServer
from tests.support.procs import VENV_BIN, Proc, free_port, running, wait_until

pytestmark = pytest.mark.integration
queue_redis = queue_fixtures.queue_redis
__all__ = ["fake_openai", "queue_redis"]
DEADLINE = "2"
MODEL = "qwen3:4b"
TRICKLE = " ".join(f"w{i}" for i in range(3000))  # 0.05 s apart: 150 s in all, every read well on time
BEHAVIOURS: dict[str, dict[str, Any]] = {
    "never answers": {"content": "unused", "hang": "before_headers"},
    "hangs mid-stream": {"content": "one two three four five", "hang": {"after_tokens": 2}},
    "trickles": {"content": TRICKLE, "token_delay": 0.05},
}


@dataclass
class Agent:
    url: str
    procs: list[Proc]
    program: Any  # (reply) -> None: what the model server does with the next request

    def logs(self) -> str:
        return "\n".join(p.output() for p in self.procs)


def program_ollama(fake: FakeOllama) -> Any:
    return lambda reply: fake.script(default=reply)


def program_openai(fake: FakeOpenAI) -> Any:
    return lambda reply: fake.script(reply, models=[MODEL])


@pytest.fixture(scope="module", params=["ollama-direct", "openai-direct", "ollama-queue", "openai-queue"])
def agent(
    request: pytest.FixtureRequest,
    fake_ollama: FakeOllama,
    fake_openai: FakeOpenAI,
    mcp_server: McpServer,
    queue_redis: RedisServer,
) -> Iterator[Agent]:
    protocol, mode = str(request.param).split("-")
    model_url = fake_ollama.url if protocol == "ollama" else fake_openai.url
    program = program_ollama(fake_ollama) if protocol == "ollama" else program_openai(fake_openai)
    program({"content": "ready"})
    model = {"MODEL_PROTOCOL": protocol, "MODEL_URL": model_url, "MODEL_NAME": MODEL, "EXTRA_MODELS": "",
             "ROUND_TIMEOUT_SECONDS": DEADLINE}  # fmt: skip
    port = free_port()
    api_env = agent_env(fake_ollama.url, mcp_server, port, MODEL_BACKEND=mode, REDIS_URL=queue_redis.url, **model)
    api = ["agent-api"], {"env": api_env, "ready_url": f"http://127.0.0.1:{port}/healthz"}
    if mode == "direct":
        with running(api[0], **api[1]) as proc:
            yield Agent(f"http://127.0.0.1:{port}", [proc], program)
        return
    metrics = free_port()
    worker_env = {"REDIS_URL": queue_redis.url, "GPU_ID": f"deadline-{protocol}", "WORKER_METRICS_PORT": str(metrics),
                  "THINK_HOLDBACK_MODELS": "", "LOG_LEVEL": "INFO", **model}  # fmt: skip
    worker_ready = f"http://127.0.0.1:{metrics}/metrics"
    with (
        running([str(VENV_BIN / "agent-worker")], env=worker_env, ready_url=worker_ready, timeout=60) as worker,
        running(api[0], **api[1]) as proc,
    ):
        yield Agent(f"http://127.0.0.1:{port}", [proc, worker], program)


def ask(agent: Agent, timeout: float = 60) -> httpx.Response:
    body = {"model": MODEL, "messages": [{"role": "user", "content": "How many dollars were deposited today?"}]}
    return httpx.post(f"{agent.url}/v1/chat/completions", json=body, timeout=timeout)


@pytest.mark.parametrize("behaviour", BEHAVIOURS)
def test_a_round_past_round_timeout_seconds_is_a_504(agent: Agent, behaviour: str) -> None:
    agent.program(BEHAVIOURS[behaviour])
    resp = ask(agent)
    assert resp.status_code == 504, resp.text
    assert resp.json()["error"]["code"] == "timeout"
    assert "ROUND_TIMEOUT_SECONDS" in agent.logs() or "did not answer in time" in agent.logs()
    assert "Traceback" not in agent.logs() and "CancelledError" not in agent.logs()


def gone_requests(agent: Agent) -> float:
    text = httpx.get(f"{agent.url}/metrics", timeout=10).text
    found = re.findall(r'agent_request_duration_seconds_count\{[^}]*status="499"[^}]*\} (\S+)', text)
    return sum(float(n) for n in found)


def test_a_client_that_gives_up_first_leaves_no_traceback(agent: Agent) -> None:
    agent.program(BEHAVIOURS["never answers"])
    before = gone_requests(agent)
    with pytest.raises(httpx.ReadTimeout):
        ask(agent, timeout=0.5)
    wait_until(lambda: gone_requests(agent) > before, timeout=30, what="the agent to notice the client left")
    assert "Traceback" not in agent.logs() and "CancelledError" not in agent.logs()
