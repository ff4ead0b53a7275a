"""bench-loop: agent-api's overhead per round (direct backend) against a zero-latency scripted Ollama.

Interleaves three measurements so machine noise hits them alike: a direct /api/chat call to the fake,
a one-round agent request (no tool call) and a two-round agent request with one real MCP tool call.
"""

from __future__ import annotations

import os
import secrets
import sys
import tempfile
import time
from pathlib import Path

import httpx

from tests.bench import first_token, memory, tool_round
from tests.bench.stats import summary_ms
from tests.support import round_keys
from tests.support.procs import free_port, running

MSG = [{"role": "user", "content": "hello"}]


def main() -> None:
    os.environ.update(round_keys.env())  # a round-key pair, as secrets-init makes one: agent-api signs, workers verify
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    n = int(args[0]) if args else 300
    tmp = Path(tempfile.mkdtemp(prefix="bench-loop-"))
    o_port, m_port, a_port, token = free_port(), free_port(), free_port(), secrets.token_urlsafe(16)
    o_url, a_url = f"http://127.0.0.1:{o_port}", f"http://127.0.0.1:{a_port}"
    mcp_env = {
        "MCP_PORT": str(m_port),
        "MCP_TOKEN": token,
        "FILES_ROOT": str(tmp),
        "DATA_DIR": str(tmp),
        "LOG_LEVEL": "WARNING",
    }
    agent_env = memory.agent_env(tmp, o_url, f"http://127.0.0.1:{m_port}/mcp", token) | {
        "AGENT_PORT": str(a_port),
        "THINK": "false",  # issue 29's case: thinking off, so a held model's content is the whole answer
        "EXTRA_MODELS": "qwen3:8b",  # a hybrid Qwen3: not in THINK_HOLDBACK_MODELS, its answer streams
    }
    with (
        running(["python", "-m", "tests.fakes.fake_ollama", "--port", str(o_port)], ready_url=f"{o_url}/"),
        running(["mcp-server"], env=mcp_env, ready_url=f"http://127.0.0.1:{m_port}/healthz", timeout=60),
        running(["agent-api"], env=agent_env, ready_url=f"{a_url}/healthz", timeout=90) as api,
    ):
        rule = {
            "when": {"user_contains": "time", "last_role": "user"},
            "reply": {"tool_calls": [{"name": "sistem_bilgisi", "arguments": {}}]},
        }
        script = {"rules": [*tool_round.rules(), rule], "default": {"content": "ok"}}
        httpx.post(f"{o_url}/_fake/script", json=script).raise_for_status()
        direct, one_round, two_rounds = [], [], []
        with httpx.Client(timeout=30) as http:
            for i in range(n + 20):
                t0 = time.perf_counter()
                http.post(f"{o_url}/api/chat", json={"model": "qwen3:4b", "messages": MSG, "stream": True})
                t1 = time.perf_counter()
                plain = http.post(f"{a_url}/v1/chat/completions", json={"model": "qwen3:4b", "messages": MSG})
                t2 = time.perf_counter()
                tooled = http.post(
                    f"{a_url}/v1/chat/completions",
                    json={"model": "qwen3:4b", "messages": [{"role": "user", "content": "what time"}]},
                )
                t3 = time.perf_counter()
                # A benchmark of error answers measures nothing: every answer must be the real one.
                assert plain.status_code == 200 and tooled.status_code == 200, (plain.text, tooled.text)
                assert tooled.json()["local_agent"]["tools_used"] == ["sistem_bilgisi"], tooled.text
                if i >= 20:  # warm-up discarded
                    direct.append(t1 - t0)
                    one_round.append(t2 - t1)
                    two_rounds.append(t3 - t2)
        overhead = [a - d for a, d in zip(one_round, direct, strict=True)]
        print(f"bench-loop: {n} interleaved iterations on loopback, zero-latency scripted Ollama")
        print(f"  direct /api/chat call            {summary_ms(direct)}")
        print(f"  agent, 1 round, no tool          {summary_ms(one_round)}")
        print(f"  agent, 2 rounds + 1 MCP call     {summary_ms(two_rounds)}")
        print(f"  agent overhead per round         {summary_ms(overhead)}   (target: median < 10 ms)")
        if "--tool-round" not in sys.argv:
            first_token.run(o_url, a_url, max(20, n // 10))
            httpx.post(f"{o_url}/_fake/script", json=script).raise_for_status()  # first_token scripted its own
        mcp_url = f"http://127.0.0.1:{m_port}/mcp"
        tool_round.run(o_url, mcp_url, token, agent_env, (a_url, api), max(30, n // 3))


if __name__ == "__main__":
    main()
