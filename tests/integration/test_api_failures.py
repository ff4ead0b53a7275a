"""A dead or incomplete dependency: the chat user reads a clear message free of internal addresses and commands,
the operator finds the dependency and the fix in /readyz (and the logs); the API itself stays up."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest

from tests.integration.conftest import FakeOllama, McpServer, agent_env
from tests.support.procs import free_port, running
from tests.support.readiness import details

CHAT = {"model": "qwen3:4b", "messages": [{"role": "user", "content": "hello"}]}


@contextmanager
def agent(ollama_url: str, mcp: McpServer, **extra: str) -> Iterator[str]:
    port = free_port()
    with running(
        ["agent-api"], env=agent_env(ollama_url, mcp, port, **extra), ready_url=f"http://127.0.0.1:{port}/healthz"
    ):
        yield f"http://127.0.0.1:{port}"


def test_dead_ollama_is_a_clear_503_and_readyz_says_so(mcp_server: McpServer) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    with agent(dead, mcp_server) as url:
        resp = httpx.post(f"{url}/v1/chat/completions", json=CHAT, timeout=30)
        assert resp.status_code == 503
        message = resp.json()["error"]["message"]
        assert "model service is unavailable" in message and "127.0.0.1" not in message
        ready = httpx.get(f"{url}/readyz", timeout=30)
        assert ready.status_code == 503 and ready.json()["checks"] == {"model": "not ready", "mcp_server": "ready"}
        assert dead not in ready.text  # an internal address is for admins (and the log) only
        checks = details(url)
        assert checks["model"]["ok"] is False and dead in checks["model"]["detail"]
        assert checks["mcp_server"]["ok"] is True


def test_dead_mcp_server_is_a_clear_503(fake_ollama: FakeOllama, mcp_server: McpServer) -> None:
    gone = McpServer(
        f"http://127.0.0.1:{free_port()}/mcp",
        mcp_server.token,
        mcp_server.files_root,
        mcp_server.data_dir,
        mcp_server.proc,
    )
    with agent(fake_ollama.url, gone) as url:
        resp = httpx.post(f"{url}/v1/chat/completions", json=CHAT, timeout=60)
        assert resp.status_code == 503
        assert "company's tools are unavailable" in resp.json()["error"]["message"]
        assert gone.url not in resp.text
        stream = httpx.post(f"{url}/api/chat", json=CHAT, timeout=60)
        assert stream.status_code == 503 and "tools are unavailable" in stream.json()["error"]
        assert gone.url not in stream.text
        assert details(url)["mcp_server"]["ok"] is False


def test_wrong_mcp_token_is_a_clear_503(fake_ollama: FakeOllama, mcp_server: McpServer) -> None:
    wrong = McpServer(
        mcp_server.url, "not-the-token-000000", mcp_server.files_root, mcp_server.data_dir, mcp_server.proc
    )
    with agent(fake_ollama.url, wrong) as url:
        resp = httpx.post(f"{url}/v1/chat/completions", json=CHAT, timeout=60)
        assert resp.status_code == 503
        assert "company's tools are unavailable" in resp.json()["error"]["message"]
        assert details(url)["mcp_server"]["ok"] is False


def test_model_not_pulled_says_so_and_readyz_names_the_pull_command(mcp_server: McpServer) -> None:
    port = free_port()
    ollama_url = f"http://127.0.0.1:{port}"
    with (
        running(
            ["python", "-m", "tests.fakes.fake_ollama", "--port", str(port), "--models", "qwen2.5:3b"],
            ready_url=f"{ollama_url}/api/version",
        ),
        agent(ollama_url, mcp_server) as url,
    ):
        resp = httpx.post(f"{url}/v1/chat/completions", json=CHAT, timeout=30)
        assert resp.status_code == 404
        message = resp.json()["error"]["message"]
        assert "qwen3:4b" in message and "not installed" in message and "docker compose" not in message
        model = details(url)["model"]
        assert model["missing"] == ["qwen3:4b"] and "ollama pull qwen3:4b" in model["fix"]


def test_stream_error_after_first_byte_ends_with_an_error_event(agent_api_url: str, ollama: FakeOllama) -> None:
    ollama.script(
        default={"content": "one two three four five", "stream_error": {"after_tokens": 2, "message": "runner crashed"}}
    )
    with httpx.stream(
        "POST", f"{agent_api_url}/v1/chat/completions", timeout=30, json={**CHAT, "model": "qwen2.5:3b", "stream": True}
    ) as resp:
        assert resp.status_code == 200
        lines = [line for line in resp.iter_lines() if line.startswith("data: ")]
    assert '"error"' in lines[-1] and "model failed" in lines[-1] and "runner crashed" not in lines[-1]
    assert "[DONE]" not in lines[-1]


@pytest.fixture
def agent_api_url(agent_api: object) -> str:
    return str(agent_api.url)  # type: ignore[attr-defined]
