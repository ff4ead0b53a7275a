"""Regression (issue 11, item 7): a request sent a byte at a time was never timed out on either server
(400 sockets held for 20 s). Both now close a connection whose request is not complete in time."""

from __future__ import annotations

import secrets
import socket
import time
from pathlib import Path

import pytest

from tests.integration.conftest import FakeOllama, McpServer, agent_env
from tests.support.procs import free_port, running

pytestmark = pytest.mark.integration
READ_TIMEOUT = 1.0


def closed_within(port: int, seconds: float) -> bool:
    """Send half a request and wait: True when the server closes the connection within `seconds`."""
    with socket.create_connection(("127.0.0.1", port), timeout=seconds) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n")
        deadline = time.monotonic() + seconds
        try:
            while time.monotonic() < deadline:
                if sock.recv(1024) == b"":
                    return True
        except TimeoutError:
            return False
        except ConnectionResetError:
            return True
    return False


def test_the_agent_api_closes_a_half_sent_request(fake_ollama: FakeOllama, mcp_server: McpServer) -> None:
    port = free_port()
    env = agent_env(fake_ollama.url, mcp_server, port, REQUEST_READ_TIMEOUT_SECONDS=str(READ_TIMEOUT))
    with running(["agent-api"], env=env, ready_url=f"http://127.0.0.1:{port}/healthz"):
        assert closed_within(port, READ_TIMEOUT + 4)


def test_the_mcp_server_closes_a_half_sent_request(tmp_path: Path) -> None:
    port = free_port()
    env = {
        "MCP_HOST": "127.0.0.1",
        "MCP_PORT": str(port),
        "MCP_TOKEN": secrets.token_urlsafe(24),
        "FILES_ROOT": str(tmp_path),
        "DATA_DIR": str(tmp_path / "data"),
        "MCP_REQUEST_READ_TIMEOUT_SECONDS": str(READ_TIMEOUT),
    }
    with running(["mcp-server"], env=env, ready_url=f"http://127.0.0.1:{port}/healthz", timeout=60):
        assert closed_within(port, READ_TIMEOUT + 4)
