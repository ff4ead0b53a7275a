"""The real engine for tests and measurements: llama.cpp's llama-server (built by scripts/llama-server) serving
SmolLM2-135M-Instruct on the CPU (real tokens, never a measure of a useful model) or, by `model`, one of the
script's Qwen2.5-Coder models, and an agent stack (MCP server on the demo database + agent-api in direct mode
speaking the OpenAI protocol) in front of it."""

from __future__ import annotations

import contextlib
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

from tests.support.procs import REPO, free_port, running

MODEL = "smollm2:135m"


def engine_paths(model: str = "smollm2") -> tuple[str, str] | None:
    """The built llama-server and the GGUF, or None (scripts/llama-server --check builds nothing)."""
    found = engine_check(model)
    return None if found is None else (found["LLAMA_SERVER_BIN"], found["LLAMA_MODEL_GGUF"])


def engine_check(model: str) -> dict[str, str] | None:
    """scripts/llama-server --model MODEL --check's lines (paths and the served name), or None if not there."""
    cmd = [str(REPO / "scripts/llama-server"), "--model", model, "--check"]
    found = subprocess.run(cmd, capture_output=True, text=True, check=False)
    return dict(line.split("=", 1) for line in found.stdout.split()) if found.returncode == 0 else None


def served_name(model: str) -> str:
    """The name scripts/llama-server serves MODEL under (fetching it if it is not cached yet)."""
    cmd = [str(REPO / "scripts/llama-server"), "--model", model]
    found = subprocess.run(cmd, capture_output=True, text=True, check=True)
    lines = dict(line.split("=", 1) for line in found.stdout.split())
    return lines["LLAMA_MODEL_NAME"]


def engine_cmd(port: int) -> list[str]:
    """The engine as users start it (scripts/llama-server serve), on one thread: on a shared 2-core box two
    spinning threads measured ~1 token/s, waiting for each other (a later flag wins over the script's)."""
    return [str(REPO / "scripts/llama-server"), "serve", str(port), "--threads", "1"]


@contextlib.contextmanager
def engine(ctx: int = 8192, n_predict: int = 96, model: str = "smollm2") -> Iterator[str]:
    if engine_paths(model) is None:
        raise RuntimeError(f"llama-server or {model} is not there: run scripts/llama-server --model {model}")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {"LLAMA_CTX": str(ctx), "LLAMA_N_PREDICT": str(n_predict), "LLAMA_MODEL": model}
    with running(engine_cmd(port), env=env, ready_url=f"{url}/health", timeout=180):
        yield url


@contextlib.contextmanager
def agent_stack(engine_url: str, tool_calling: str, model_name: str = MODEL, **extra: str) -> Iterator[str]:
    """MCP server + agent-api (direct, MODEL_PROTOCOL=openai) in front of `engine_url`; yields the API's /v1 URL.
    The prompt cache is on: the system prompt (and with constrained calling the tool catalogue) is the same prefix
    in every round, so the engine evaluates it once instead of once per round."""
    mcp_port, api_port, token = free_port(), free_port(), "real-engine-" + "x" * 24
    work = Path(tempfile.mkdtemp(prefix="real-engine-"))
    (work / "files").mkdir()
    mcp_env = {"MCP_HOST": "127.0.0.1", "MCP_PORT": str(mcp_port), "MCP_TOKEN": token,
               "FILES_ROOT": str(work / "files"), "DATA_DIR": str(work)}  # fmt: skip
    api_env = {"AGENT_HOST": "127.0.0.1", "AGENT_PORT": str(api_port), "MCP_URL": f"http://127.0.0.1:{mcp_port}/mcp",
               "MCP_TOKEN": token, "MODEL_BACKEND": "direct", "MODEL_PROTOCOL": "openai", "MODEL_URL": engine_url,
               "MODEL_NAME": model_name, "EXTRA_MODELS": "", "THINK_HOLDBACK_MODELS": "", "MODEL_CACHE_PROMPT": "true",
               "TOOL_CALLING": tool_calling, "AGENT_AUTH": "none", "ANONYMOUS_ROLE": "admin",
               "RATE_LIMIT_PER_MINUTE": "0", "AUDIT_DIR": str(work / "audit"), "ROUND_TIMEOUT_SECONDS": "300",
               **extra}  # fmt: skip
    with (
        running(["mcp-server"], env=mcp_env, ready_url=f"http://127.0.0.1:{mcp_port}/healthz", timeout=60),
        running(["agent-api"], env=api_env, ready_url=f"http://127.0.0.1:{api_port}/healthz", timeout=60),
    ):
        yield f"http://127.0.0.1:{api_port}/v1"
