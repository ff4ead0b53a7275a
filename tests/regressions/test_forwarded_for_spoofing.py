"""Regression (issue 11, item 1): uvicorn's own proxy-header handling trusted `X-Forwarded-For` from any
loopback client, so a local client could claim a TRUSTED_PROXIES address and forge the SSO identity; the
same header forged the audit `client` field in api_key mode, and a real SSO proxy on the same host that
appended XFF got 401. The peer is the socket's address; `client` is the right-most untrusted XFF hop."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent.security.auth import add_key
from tests.integration.conftest import FakeOllama, McpServer, agent_env
from tests.support.procs import free_port, running

pytestmark = pytest.mark.integration
BODY = {"model": "qwen3:4b", "messages": [{"role": "user", "content": "hi"}]}
MALLORY = {"X-Forwarded-User": "mallory", "X-Forwarded-Groups": "admin"}


@contextlib.contextmanager
def agent(ollama: FakeOllama, mcp: McpServer, tmp: Path, **extra: str) -> Iterator[tuple[str, Path]]:
    port = free_port()
    env = agent_env(ollama.url, mcp, port, AUDIT_DIR=str(tmp / "audit"), **extra)
    with running(["agent-api"], env=env, ready_url=f"http://127.0.0.1:{port}/healthz"):
        yield f"http://127.0.0.1:{port}", tmp / "audit" / "audit.jsonl"


def last_record(audit: Path) -> dict[str, Any]:
    return dict(json.loads(audit.read_text().splitlines()[-1]))


def test_a_local_client_cannot_pose_as_the_trusted_proxy(
    ollama: FakeOllama, mcp_server: McpServer, tmp_path: Path
) -> None:
    with agent(ollama, mcp_server, tmp_path, AGENT_AUTH="trusted_header", TRUSTED_PROXIES="10.9.9.9") as (url, _):
        forged = httpx.post(
            f"{url}/v1/chat/completions", json=BODY, headers={"X-Forwarded-For": "10.9.9.9", **MALLORY}, timeout=30
        )
    assert forged.status_code == 401
    assert ollama.requests() == []


def test_a_real_proxy_that_appends_xff_is_accepted_and_the_client_is_the_rightmost_untrusted_hop(
    ollama: FakeOllama, mcp_server: McpServer, tmp_path: Path
) -> None:
    sso = {"X-Forwarded-User": "ayse", "X-Forwarded-Groups": "support"}
    with agent(ollama, mcp_server, tmp_path, AGENT_AUTH="trusted_header", TRUSTED_PROXIES="127.0.0.1") as (url, log):
        # the client wrote "6.6.6.6" itself; the proxy appended the address it saw (203.0.113.7)
        resp = httpx.post(
            f"{url}/v1/chat/completions", json=BODY, headers={"X-Forwarded-For": "6.6.6.6, 203.0.113.7", **sso}
        )
        assert resp.status_code == 200
        assert (last_record(log)["user"], last_record(log)["client"]) == ("ayse", "203.0.113.7")


def test_xff_from_an_untrusted_peer_does_not_change_the_audited_client(
    ollama: FakeOllama, mcp_server: McpServer, tmp_path: Path
) -> None:
    key = add_key(tmp_path / "keys.yaml", "alice", "admin")
    env = {"AGENT_AUTH": "api_key", "AGENT_KEYS_FILE": str(tmp_path / "keys.yaml")}
    with agent(ollama, mcp_server, tmp_path, **env) as (url, log):
        headers = {"Authorization": f"Bearer {key}", "X-Forwarded-For": "198.51.100.99"}
        assert httpx.post(f"{url}/v1/chat/completions", json=BODY, headers=headers, timeout=30).status_code == 200
        assert last_record(log)["client"] == "127.0.0.1"
