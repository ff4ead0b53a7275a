"""Integration fixtures: real processes on loopback (scripted Ollama, MCP server, agent API), free ports."""

from __future__ import annotations

import secrets
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.procs import Proc, free_port, running

pytestmark = pytest.mark.integration


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    """A failed test that used a real engine shows the engine's own last log lines (tests.support.engine)."""
    try:
        return (yield)
    except BaseException as exc:
        values = getattr(item, "funcargs", {}).values()
        parts: list[Any] = [p for v in values for p in (v, getattr(v, "engine", None))]
        engines = {id(p): p for p in parts if hasattr(p, "failure_note")}
        for engine in engines.values():  # an engine fixture and a stack holding it: one note
            exc.add_note(engine.failure_note())
        raise


@dataclass
class FakeOllama:
    url: str
    proc: Proc

    def script(self, **behaviour: Any) -> None:
        httpx.post(f"{self.url}/_fake/reset", timeout=5).raise_for_status()
        httpx.post(f"{self.url}/_fake/script", json=behaviour, timeout=5).raise_for_status()

    def requests(self) -> list[dict[str, Any]]:
        return list(httpx.get(f"{self.url}/_fake/requests", timeout=5).json())

    def stats(self) -> dict[str, Any]:
        return dict(httpx.get(f"{self.url}/_fake/stats", timeout=5).json())


@dataclass
class FakeOpenAI:
    url: str

    def script(self, *replies: dict[str, Any], **extra: Any) -> None:
        httpx.post(f"{self.url}/_fake/script", json={"replies": list(replies), **extra}, timeout=5).raise_for_status()

    def requests(self) -> list[dict[str, Any]]:
        return list(httpx.get(f"{self.url}/_fake/requests", timeout=5).json()["requests"])


@pytest.fixture(scope="module")
def fake_openai() -> Iterator[FakeOpenAI]:
    """The scripted OpenAI-compatible server (tests/fakes/fake_openai.py), one per test module."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = ["python", "-m", "tests.fakes.fake_openai", "--host", "127.0.0.1", "--port", str(port)]
    with running(cmd, ready_url=f"{url}/v1/models"):
        yield FakeOpenAI(url)


@dataclass
class McpServer:
    url: str
    token: str
    files_root: Path
    data_dir: Path
    proc: Proc


@dataclass
class AgentApi:
    url: str
    proc: Proc


@pytest.fixture(scope="session")
def fake_ollama() -> Iterator[FakeOllama]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with running(
        ["python", "-m", "tests.fakes.fake_ollama", "--host", "127.0.0.1", "--port", str(port)],
        ready_url=f"{url}/api/version",
    ) as proc:
        yield FakeOllama(url, proc)


@pytest.fixture
def ollama(fake_ollama: FakeOllama) -> FakeOllama:
    """The session's scripted Ollama, reset to its default behaviour for this test."""
    fake_ollama.script()
    return fake_ollama


@pytest.fixture(scope="session")
def mcp_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[McpServer]:
    port, token = free_port(), secrets.token_urlsafe(24)
    files_root, data_dir = tmp_path_factory.mktemp("files"), tmp_path_factory.mktemp("mcp-data")
    (files_root / "readme.txt").write_text("Quarterly targets: 42 new accounts.\n")
    env = {
        "MCP_HOST": "127.0.0.1",
        "MCP_PORT": str(port),
        "MCP_TOKEN": token,
        "FILES_ROOT": str(files_root),
        "DATA_DIR": str(data_dir),
    }
    with running(["mcp-server"], env=env, ready_url=f"http://127.0.0.1:{port}/healthz", timeout=60) as proc:
        yield McpServer(f"http://127.0.0.1:{port}/mcp", token, files_root, data_dir, proc)


def agent_env(ollama_url: str, mcp: McpServer, port: int, **extra: str) -> dict[str, str]:
    return {
        "AGENT_HOST": "127.0.0.1",
        "AGENT_PORT": str(port),
        "OLLAMA_URL": ollama_url,
        "MCP_URL": mcp.url,
        "MCP_TOKEN": mcp.token,
        "MODEL_BACKEND": "direct",
        "LOG_LEVEL": "INFO",
        "EXTRA_MODELS": "qwen2.5:3b",
        # These tests exercise the API itself: authentication and rate limits are off (their own tests are
        # test_auth_*.py) and the audit log goes to a private directory, never into the repository.
        "AGENT_AUTH": "none",
        "ANONYMOUS_ROLE": "admin",
        "RATE_LIMIT_PER_MINUTE": "0",
        "AUDIT_DIR": tempfile.mkdtemp(prefix="agent-audit-"),
        **extra,
    }


@pytest.fixture(scope="session")
def agent_api(fake_ollama: FakeOllama, mcp_server: McpServer) -> Iterator[AgentApi]:
    """agent-api calling the scripted Ollama directly (the GPU queue has its own tests)."""
    port = free_port()
    with running(
        ["agent-api"], env=agent_env(fake_ollama.url, mcp_server, port), ready_url=f"http://127.0.0.1:{port}/healthz"
    ) as proc:
        yield AgentApi(f"http://127.0.0.1:{port}", proc)
