"""Issue 13: changing MCP_TOKEN and running `docker compose up -d` re-ran only secrets-init, which rewrote the
token file; agent-api and mcp-server kept the token they read at start, so as soon as one of them restarted,
every tool question failed with a 503 that never mentioned the 401 behind it.

Now both follow MCP_TOKEN_FILE while they run (agent_contract.secrets.RotatingSecret), and a refused token is
named as such in the log and /readyz. Real mcp-server and agent-api processes reading one token file, rotated
the way secrets-init does it (write a new file, rename it over the old one).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.integration.conftest import FakeOllama, McpServer, agent_env
from tests.support.procs import Proc, free_port, running, start
from tests.support.readiness import details

TIME_RULE = {
    "when": {"user_contains": "what time", "last_role": "user"},
    "reply": {"tool_calls": [{"name": "sistem_bilgisi", "arguments": {}}]},
}


def rotate(path: Path, token: str) -> None:
    """As images/entrypoint/init-secrets does: a new file renamed over the old one."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(token)
    tmp.rename(path)


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    rotate(path, secrets.token_hex(32))
    return path


@pytest.fixture
def mcp(tmp_path: Path, token_file: Path) -> Iterator[McpServer]:
    port = free_port()
    files, data = tmp_path / "files", tmp_path / "data"
    files.mkdir()
    data.mkdir()
    env = {"MCP_HOST": "127.0.0.1", "MCP_PORT": str(port), "MCP_TOKEN": "", "MCP_TOKEN_FILE": str(token_file),
           "FILES_ROOT": str(files), "DATA_DIR": str(data)}  # fmt: skip
    with running(["mcp-server"], env=env, ready_url=f"http://127.0.0.1:{port}/healthz", timeout=60) as proc:
        yield McpServer(f"http://127.0.0.1:{port}/mcp", "", files, data, proc)


def start_api(ollama: FakeOllama, mcp: McpServer, **token: str) -> tuple[str, Proc]:
    port = free_port()
    env = agent_env(ollama.url, mcp, port, **token)
    return f"http://127.0.0.1:{port}", start(["agent-api"], env=env, ready_url=f"http://127.0.0.1:{port}/healthz")


def ask(api: str) -> httpx.Response:
    body = {"model": "qwen3:4b", "messages": [{"role": "user", "content": "What time is it?"}]}
    return httpx.post(f"{api}/v1/chat/completions", json=body, timeout=60)


def mcp_status(mcp: McpServer, token: str) -> int:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    accept = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {token}"}
    return httpx.post(mcp.url, json=body, headers=accept, timeout=10).status_code


def test_a_rotated_token_file_reaches_both_running_services(
    ollama: FakeOllama, mcp: McpServer, token_file: Path
) -> None:
    ollama.script(rules=[TIME_RULE])
    api, proc = start_api(ollama, mcp, MCP_TOKEN="", MCP_TOKEN_FILE=str(token_file))
    try:
        assert ask(api).status_code == 200
        old = token_file.read_text()
        rotate(token_file, secrets.token_hex(32))
        assert mcp_status(mcp, old) == 401  # the server requires the new token from the next request on
        reply = ask(api)  # and the agent presents it: no restart of either
        assert reply.status_code == 200, reply.text
        assert reply.json()["local_agent"]["tool_calls"][0]["outcome"] == "ok"
    finally:
        proc.stop()


def test_a_token_the_server_refuses_is_named_in_readyz_and_the_log(
    ollama: FakeOllama, mcp: McpServer, token_file: Path
) -> None:
    ollama.script(rules=[TIME_RULE])
    api, proc = start_api(ollama, mcp, MCP_TOKEN=secrets.token_hex(32))  # not the server's token
    try:
        reply = ask(api)
        assert reply.status_code == 503
        assert mcp.url not in reply.text and "MCP_TOKEN" not in reply.text  # chat users get no internals
        check = details(api)["mcp_server"]
        assert check["ok"] is False
        assert "401" in check["detail"] and "different MCP_TOKENs" in check["detail"]
        assert "refused the agent's token (401 Unauthorized)" in proc.output()
    finally:
        proc.stop()
