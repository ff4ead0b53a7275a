# ruff: noqa: F401, F811
"""The HTTP edge of the real `mcp-server` process: tool listing, bearer auth, Host/Origin checks, health,
metrics, request ids in logs, and the refusal to start without a token."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

# mcp_sqlite is a fixture imported by name, hence F401/F811 off in this file.
from tests.integration.mcp_fixtures import ToolServer, mcp_client, mcp_sqlite, run_server
from tests.support.contract import TOOL_NAMES
from tests.support.procs import VENV_BIN, free_port, wait_until

pytestmark = pytest.mark.integration
NAMES = set(TOOL_NAMES)
CALL = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "sistem_bilgisi", "arguments": {}}}


def post(server: ToolServer, headers: dict[str, str], auth: bool = True) -> httpx.Response:
    base = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-11-25",
        "X-Agent-Role": "admin",
    }
    if auth:
        base["Authorization"] = f"Bearer {server.token}"
    return httpx.post(server.url, json=CALL, headers={**base, **headers}, timeout=10)


async def test_listing_shows_every_registered_tool_documented(mcp_sqlite: ToolServer) -> None:
    async with mcp_client(mcp_sqlite) as client:
        tools = (await client.list_tools()).tools
    assert {t.name for t in tools} == NAMES
    for tool in tools:
        text = tool.description or ""
        for section in ("WHEN TO USE:", "WHEN NOT TO USE:", "ALWAYS call this tool", "Example:"):
            assert section in text, (tool.name, section)
        assert not text.startswith(" ") and "\n    " not in text  # cleaned, same on every Python


async def test_no_token_gets_401_and_the_sdk_client_cannot_connect(mcp_sqlite: ToolServer) -> None:
    assert post(mcp_sqlite, {}, auth=False).status_code == 401
    wrong = post(mcp_sqlite, {"Authorization": "Bearer " + "x" * 32}, auth=False)
    assert wrong.status_code == 401 and wrong.headers["www-authenticate"].startswith("Bearer")
    with pytest.raises(Exception):  # noqa: B017  (the SDK wraps the 401 in an ExceptionGroup)
        async with Client(streamable_http_client(mcp_sqlite.url)) as client:
            await client.list_tools()


def test_foreign_host_gets_421_and_foreign_origin_403(mcp_sqlite: ToolServer) -> None:
    assert post(mcp_sqlite, {"Host": "evil.example:8001"}).status_code == 421
    assert post(mcp_sqlite, {"Origin": "http://evil.example"}).status_code == 403
    # The compose service name and loopback names are allowed.
    assert post(mcp_sqlite, {"Host": "mcp-server:8001"}).status_code == 200
    assert post(mcp_sqlite, {"Host": "localhost"}).status_code == 200


def test_healthz_and_metrics_count_tool_calls(mcp_sqlite: ToolServer) -> None:
    health = httpx.get(f"{mcp_sqlite.base}/healthz", timeout=5)
    assert health.status_code == 200 and health.json()["tools"] == len(NAMES)
    assert post(mcp_sqlite, {}).status_code == 200
    post(mcp_sqlite, {}, auth=False)
    text = httpx.get(f"{mcp_sqlite.base}/metrics", timeout=5).text
    assert 'mcp_tool_calls_total{outcome="ok",tool="sistem_bilgisi"}' in text
    assert 'mcp_tool_duration_seconds_bucket{le="120.0",tool="sistem_bilgisi"}' in text
    assert 'mcp_requests_rejected_total{reason="unauthorized"}' in text


def test_request_id_is_bound_in_json_logs(mcp_sqlite: ToolServer) -> None:
    assert post(mcp_sqlite, {"X-Request-ID": "req-mcp-test-7"}).status_code == 200

    def logged() -> list[dict[str, Any]]:
        lines = [json.loads(line) for line in mcp_sqlite.proc.output().splitlines() if line.startswith("{")]
        return [e for e in lines if e.get("request_id") == "req-mcp-test-7"]

    # http_request_finished is written after the response went out: wait for both, not just the first
    wanted = {"tool_called", "http_request_finished"}
    wait_until(lambda: wanted <= {e["event"] for e in logged()}, timeout=10, what="both log lines")
    assert all("arguments" not in e for e in logged())


def _start_without_token(tmp_path: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_")}
    env |= {"MCP_PORT": str(free_port()), "DATA_DIR": str(tmp_path), "FILES_ROOT": str(tmp_path), **extra}
    return subprocess.run([str(VENV_BIN / "mcp-server")], env=env, capture_output=True, text=True, timeout=60)


def test_refuses_to_start_without_a_token(tmp_path: Path) -> None:
    done = _start_without_token(tmp_path)
    assert done.returncode == 2
    assert "MCP_TOKEN is not set" in done.stderr


def test_refuses_a_weak_token(tmp_path: Path) -> None:
    done = _start_without_token(tmp_path, MCP_TOKEN="changeme")
    assert done.returncode == 2 and "too weak" in done.stderr


def test_allow_no_token_serves_without_auth_for_local_dev(tmp_path: Path) -> None:
    with run_server(tmp_path, MCP_TOKEN="", MCP_ALLOW_NO_TOKEN="true") as server:
        assert post(server, {}, auth=False).status_code == 200


def test_tool_arguments_are_not_logged(mcp_sqlite: ToolServer) -> None:
    call = {**CALL, "params": {"name": "musteri_bakiyesi", "arguments": {"customer": "Zarife Gizlisoy"}}}
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-11-25",
        "Authorization": f"Bearer {mcp_sqlite.token}",
        "X-Agent-Role": "admin",
        "X-Request-ID": "req-private-1",
    }
    body = httpx.post(mcp_sqlite.url, json=call, headers=headers, timeout=10).json()
    assert body["result"]["isError"] is True and "Zarife Gizlisoy" in body["result"]["content"][0]["text"]
    wait_until(lambda: "req-private-1" in mcp_sqlite.proc.output(), timeout=10, what="request log line")
    assert "Gizlisoy" not in mcp_sqlite.proc.output()
