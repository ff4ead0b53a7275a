"""bench-loop, third part: one tool round through agent-api in queue mode, beside direct mode and the peer that
does the same work.

A tool round is a request whose model answers with a tool call, the tool run on the MCP server, and a second
model round that answers. Interleaved per iteration, against the same zero-latency scripted Ollama and the same
mcp-server: the model's own two calls (the floor), agent-api with MODEL_BACKEND=direct, agent-api with
MODEL_BACKEND=queue (a private redis-server and one agent-worker), and ollama-mcp-bridge from PEERS_VENVS
pointed at the same MCP server. LiteLLM's chat endpoint also runs MCP tools (1.108.7, an MCP tool with
`require_approval: "never"`), but it is not set up here yet: its tool round is not measured. Printed: each one's
time added to the model's, the CPU agent-api's whole process tree (supervisor and app process) spends per round,
and the queue mode's added time against the best peer's (target <= 0.5x).
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx
import redis

from tests.bench.first_token import LOOPBACK_ONLY
from tests.bench.stats import summary_ms, tree_cpu_seconds, venv_version
from tests.support.procs import VENV_BIN, Proc, free_port, redis_server_cmd, running

MODEL = "qwen3:4b"
TOOL = "sistem_bilgisi"
BRIDGE_SERVER = "agent"  # the bridge names a server's tools `<server>.<tool>`
ASK = "what time is it"  # the scripted model answers it with a call of TOOL (bench-loop's rule)
ASK_BRIDGE = "bridge: what time is it"
Call = Callable[[httpx.Client], None]


def rules() -> list[dict[str, object]]:
    """The bridge's tool call, named as the bridge names it; placed before bench-loop's own rule."""
    return [
        {
            "when": {"user_contains": "bridge", "last_role": "user"},
            "reply": {"tool_calls": [{"name": f"{BRIDGE_SERVER}.{TOOL}", "arguments": {}}]},
        }
    ]


def model_calls(fake_url: str) -> Call:
    """The scripted model's own two rounds: the tool call, then the answer to its result."""
    first = {"model": MODEL, "messages": [{"role": "user", "content": ASK}], "stream": False}
    call = {"function": {"name": TOOL, "arguments": {}}}
    second = {
        "model": MODEL,
        "messages": [
            {"role": "user", "content": ASK},
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "content": '{"time": "12:00"}'},
        ],
        "stream": False,
    }

    def run(http: httpx.Client) -> None:
        for body in (first, second):
            assert http.post(f"{fake_url}/api/chat", json=body).status_code == 200

    return run


def agent_call(api_url: str) -> Call:
    def run(http: httpx.Client) -> None:
        body = {"model": MODEL, "messages": [{"role": "user", "content": ASK}]}
        resp = http.post(f"{api_url}/v1/chat/completions", json=body)
        assert resp.status_code == 200, resp.text  # a benchmark of error answers measures nothing
        assert resp.json()["local_agent"]["tools_used"] == [TOOL], resp.text

    return run


def bridge_call(url: str) -> Call:
    def run(http: httpx.Client) -> None:
        body = {"model": MODEL, "messages": [{"role": "user", "content": ASK_BRIDGE}], "stream": False}
        resp = http.post(f"{url}/api/chat", json=body)
        assert resp.status_code == 200, resp.text
        assert resp.json()["message"]["content"], resp.text

    return run


@contextmanager
def queue_api(
    stack: ExitStack, agent_env: dict[str, str], bin_dir: Path = VENV_BIN
) -> Iterator[tuple[str, Proc, Proc]]:
    """agent-api in queue mode on a private redis-server, one agent-worker on the same scripted model (both from
    `bin_dir`): the API's URL, its process and the worker's."""
    tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-tool-round-")))
    r_port, a_port = free_port(), free_port()
    url = f"redis://127.0.0.1:{r_port}/0"
    stack.enter_context(running(redis_server_cmd(r_port, tmp), ready=lambda: bool(redis.Redis(port=r_port).ping())))
    worker_env = {
        "REDIS_URL": url,
        "OLLAMA_URL": agent_env["OLLAMA_URL"],
        "MODEL_NAME": MODEL,
        "LOG_LEVEL": "WARNING",
        "WORKER_METRICS_PORT": str(free_port()),
        "THINK_HOLDBACK_MODELS": "",
    }
    worker = stack.enter_context(
        running(
            [str(bin_dir / "agent-worker")],
            env=worker_env,
            ready=lambda: bool(redis.Redis(port=r_port).smembers("agent:workers")),
        )
    )
    env = {**agent_env, "AGENT_PORT": str(a_port), "MODEL_BACKEND": "queue", "REDIS_URL": url}
    env["AUDIT_DIR"] = str(tmp / "audit")
    api = stack.enter_context(
        running([str(bin_dir / "agent-api")], env=env, ready_url=f"http://127.0.0.1:{a_port}/healthz")
    )
    yield f"http://127.0.0.1:{a_port}", api, worker


def bridge(stack: ExitStack, fake_url: str, mcp_url: str, token: str) -> tuple[str, str, Proc] | None:
    """ollama-mcp-bridge from PEERS_VENVS, its one MCP server the agent's (same token, an admin caller): its URL,
    its name with the version installed there, and its process."""
    for venv in filter(None, os.environ.get("PEERS_VENVS", "").split(":")):
        binary = Path(venv) / "bin" / "ollama-mcp-bridge"
        if not binary.exists():
            continue
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-bridge-")))
        headers = {"Authorization": f"Bearer {token}", "X-Agent-User": "bench", "X-Agent-Role": "admin"}
        config = {"mcpServers": {BRIDGE_SERVER: {"url": mcp_url, "headers": headers}}}
        (tmp / "mcp-config.json").write_text(json.dumps(config))
        port = free_port()
        cmd = [str(binary), "--config", str(tmp / "mcp-config.json"), "--host", "127.0.0.1", "--port", str(port),
               "--ollama-url", fake_url]  # fmt: skip
        ready = f"http://127.0.0.1:{port}/health"
        proc = stack.enter_context(running(cmd, env=LOOPBACK_ONLY, ready_url=ready, timeout=120))
        return f"http://127.0.0.1:{port}", f"ollama-mcp-bridge {venv_version(venv, 'ollama-mcp-bridge')}", proc
    return None


def cpu_seconds(proc: Proc) -> float:
    """User + system CPU of agent-api so far: its supervisor and the app process it runs."""
    return tree_cpu_seconds(proc.popen.pid)


def run(fake_url: str, mcp_url: str, token: str, agent_env: dict[str, str], direct: tuple[str, Proc], n: int) -> None:
    with ExitStack() as stack, queue_api(stack, agent_env) as queue, httpx.Client(timeout=60) as http:
        peer = bridge(stack, fake_url, mcp_url, token)
        cases: dict[str, Call] = {
            "agent, direct mode": agent_call(direct[0]),
            "agent, queue mode": agent_call(queue[0]),
        }
        if peer:
            cases[peer[1]] = bridge_call(peer[0])
        floor, times = model_calls(fake_url), {name: list[float]() for name in cases}
        cpu = {name: 0.0 for name in ("agent, direct mode", "agent, queue mode")}
        procs = {"agent, direct mode": direct[1], "agent, queue mode": queue[1]}
        for i in range(n + 10):
            t0 = time.perf_counter()
            floor(http)
            model = time.perf_counter() - t0
            for name, call in cases.items():
                before = cpu_seconds(procs[name]) if name in procs else 0.0
                t0 = time.perf_counter()
                call(http)
                took = time.perf_counter() - t0
                if i >= 10:  # warm-up discarded
                    times[name].append(took - model)
                    if name in procs:
                        cpu[name] += cpu_seconds(procs[name]) - before
        report(times, {name: spent / (2 * n) for name, spent in cpu.items()}, peer is not None)


def report(added: dict[str, list[float]], cpu_per_round: dict[str, float], peer: bool) -> None:
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"one tool round (2 model rounds + 1 MCP call), time added to the model's own two calls, load {load}")
    for name, values in added.items():
        cpu = f"   API CPU {cpu_per_round[name] * 1000:5.1f} ms/round" if name in cpu_per_round else ""
        print(f"  {name:28} {summary_ms(values)}{cpu}")
    if not peer:
        print("  peers: ollama-mcp-bridge not found (PEERS_VENVS); LiteLLM's MCP tool round is not set up here")
        ratio = statistics.median(added["agent, queue mode"]) / statistics.median(added["agent, direct mode"])
        print(f"  queue mode / direct mode (no peer to compare): {ratio:4.2f}x")
        return
    bridge_name = next(name for name in added if name.startswith("ollama-mcp-bridge"))
    ratio = statistics.median(added["agent, queue mode"]) / statistics.median(added[bridge_name])
    print("  (LiteLLM runs MCP tools too, but its tool round is not set up in this bench: not compared)")
    print(f"  tool round added, agent queue mode / best peer ({bridge_name}): {ratio:4.2f}x", end="")
    print("   (target <= 0.5x)")
