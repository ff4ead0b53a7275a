"""The processes bench-webui runs on loopback: redis-server, the scripted Ollama, the MCP server, one agent-worker,
and any number of agent-api processes on the same queue (one per task mode)."""

from __future__ import annotations

import contextlib
import secrets
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import redis

from tests.support import round_keys
from tests.support.procs import VENV_BIN, free_port, redis_server_cmd, running

SLOW = {"first_token_delay": 1.0, "token_delay": 0.1}
SCRIPT = {
    "rules": [
        {
            "when": {"user_contains": "deposit", "last_role": "user", "has_tools": True},
            "reply": {"tool_calls": [{"name": "sistem_bilgisi", "arguments": {}}], **SLOW},
        },
    ],
    "default": {"content": "There were 12 deposits today according to the report.", **SLOW},
}


def api_env(env: dict[str, str], tasks: str | None) -> dict[str, str]:
    """An agent-api's environment for one task mode (None: the client sends no tasks; the API keeps its default)."""
    return env | ({"CLIENT_TASKS": tasks} if tasks else {})


@contextlib.contextmanager
def services(tmp: Path, model: str) -> Iterator[tuple[str, dict[str, str], Callable[[dict[str, str]], str]]]:
    """Yields the fake's URL, the agent-api base environment and a function starting one more agent-api."""
    r_port, o_port, m_port, token = free_port(), free_port(), free_port(), secrets.token_urlsafe(16)
    fake, redis_url = f"http://127.0.0.1:{o_port}", f"redis://127.0.0.1:{r_port}/0"
    common = {"OLLAMA_URL": fake, "MODEL_NAME": model, "REDIS_URL": redis_url, "LOG_LEVEL": "WARNING"}
    worker_env = common | {
        "WORKER_METRICS_PORT": str(free_port()),
        "THINK_HOLDBACK_MODELS": "",
        "ROUND_VERIFY_KEY": round_keys.verify_key(),  # as secrets-init gives agent-worker its half of the pair
    }
    mcp_env = {"MCP_PORT": str(m_port), "MCP_TOKEN": token, "FILES_ROOT": str(tmp), "DATA_DIR": str(tmp)}
    env = common | {
        "MODEL_BACKEND": "queue",
        "MCP_URL": f"http://127.0.0.1:{m_port}/mcp",
        "MCP_TOKEN": token,
        "AGENT_AUTH": "none",
        "ANONYMOUS_ROLE": "admin",
        "RATE_LIMIT_PER_MINUTE": "0",
        "AUDIT_DIR": str(tmp / "audit"),
        "THINK_HOLDBACK_MODELS": "",
        "ROUND_SIGNING_KEY": round_keys.signing_key(),  # ... and agent-api the other
    }
    with contextlib.ExitStack() as stack:
        pong = lambda: bool(redis.Redis(port=r_port).ping())  # noqa: E731
        stack.enter_context(running(redis_server_cmd(r_port, tmp), ready=pong))
        fake_cmd = [sys.executable, "-m", "tests.fakes.fake_ollama", "--port", str(o_port), "--models", model]
        stack.enter_context(running(fake_cmd, ready_url=f"{fake}/api/version", timeout=120))
        mcp_ready = f"http://127.0.0.1:{m_port}/healthz"
        mcp_env["LOG_LEVEL"] = "WARNING"
        stack.enter_context(running(["mcp-server"], env=mcp_env, ready_url=mcp_ready, timeout=300))
        workers = lambda: bool(redis.Redis(port=r_port).smembers("agent:workers"))  # noqa: E731
        stack.enter_context(running([str(VENV_BIN / "agent-worker")], env=worker_env, ready=workers, timeout=300))
        httpx.post(f"{fake}/_fake/script", json=SCRIPT).raise_for_status()

        def start_api(api: dict[str, str]) -> str:
            port = free_port()
            url = f"http://127.0.0.1:{port}"
            api = api | {"AGENT_PORT": str(port)}
            stack.enter_context(running(["agent-api"], env=api, ready_url=f"{url}/healthz", timeout=300))
            return url

        yield fake, env, start_api
