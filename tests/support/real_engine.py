"""The real tiny engine for tests and measurements: llama.cpp's llama-server (built by scripts/llama-server)
serving SmolLM2-135M-Instruct on the CPU, and an agent stack (MCP server on the demo database + agent-api in
direct mode speaking the OpenAI protocol) in front of it. Real tokens, never a measure of a useful model."""

from __future__ import annotations

import contextlib
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

from tests.support.procs import REPO, free_port, running

MODEL = "smollm2:135m"


def engine_paths() -> tuple[str, str] | None:
    """The built llama-server and the GGUF, or None (scripts/llama-server --check builds nothing)."""
    found = subprocess.run([REPO / "scripts/llama-server", "--check"], capture_output=True, text=True, check=False)
    if found.returncode != 0:
        return None
    paths = dict(line.split("=", 1) for line in found.stdout.split())
    return paths["LLAMA_SERVER_BIN"], paths["LLAMA_MODEL_GGUF"]


def engine_cmd(port: int) -> list[str]:
    """The engine as users start it (scripts/llama-server serve), on one thread: on a shared 2-core box two
    spinning threads measured ~1 token/s, waiting for each other (a later flag wins over the script's)."""
    return [str(REPO / "scripts/llama-server"), "serve", str(port), "--threads", "1"]


@contextlib.contextmanager
def engine(ctx: int = 8192, n_predict: int = 96) -> Iterator[str]:
    if engine_paths() is None:
        raise RuntimeError("llama-server is not built: run scripts/llama-server")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {"LLAMA_CTX": str(ctx), "LLAMA_N_PREDICT": str(n_predict)}
    with running(engine_cmd(port), env=env, ready_url=f"{url}/health", timeout=180):
        yield url


@contextlib.contextmanager
def agent_stack(engine_url: str, tool_calling: str, **extra: str) -> Iterator[str]:
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
               "MODEL_NAME": MODEL, "EXTRA_MODELS": "", "THINK_HOLDBACK_MODELS": "", "MODEL_CACHE_PROMPT": "true",
               "TOOL_CALLING": tool_calling, "AGENT_AUTH": "none", "ANONYMOUS_ROLE": "admin",
               "RATE_LIMIT_PER_MINUTE": "0", "AUDIT_DIR": str(work / "audit"), "ROUND_TIMEOUT_SECONDS": "300",
               **extra}  # fmt: skip
    with (
        running(["mcp-server"], env=mcp_env, ready_url=f"http://127.0.0.1:{mcp_port}/healthz", timeout=60),
        running(["agent-api"], env=api_env, ready_url=f"http://127.0.0.1:{api_port}/healthz", timeout=60),
    ):
        yield f"http://127.0.0.1:{api_port}/v1"
