# ruff: noqa: F401, F811
"""Regression (issue 26, finding 6): what an outsider or a guest could learn.

- `/readyz` needs no authentication and named internal URLs, ports and host names (the model runtime's
  address, the tool server's URL, the fix commands): now it says per component only ready / not ready; the
  details are in the log and, for an admin, in `/v1/agent/info`.
- `/v1/agent/info` listed every tool to a guest: now only the tools the caller's role may use.
- The tool server's Host/Origin allow-list matched `name:*` by prefix, so `…:8001.agent-api.evil.example`
  passed: now `host[:port]` is compared whole.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import structlog

from agent.backends.base import ModelStatus
from agent.security.auth import add_key
from tests.integration.mcp_fixtures import ToolServer, mcp_sqlite
from tests.integration.test_mcp_http_security import post
from tests.unit.agent.conftest import ScriptedBackend
from tests.unit.agent.security.test_auth import POLICY, api, bearer, settings_for

INTERNAL = "http://ollama-gpu-7.corp.internal:11434"


class DownBackend(ScriptedBackend):
    async def status(self) -> ModelStatus:
        return ModelStatus(False, [], None, f"Ollama at {INTERNAL} is unreachable: start it (`systemctl start ollama`)")


@pytest.fixture
def keys(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "policy.yaml").write_text(POLICY)
    return {role: add_key(tmp_path / "keys.yaml", f"{role}-user", role) for role in ("admin", "desk", "guest")}


async def test_readyz_says_only_ready_or_not_and_admins_get_the_details(tmp_path: Path, keys: dict[str, str]) -> None:
    settings = settings_for(tmp_path, mcp_url="http://mcp-server.corp.internal:8001/mcp")
    with structlog.testing.capture_logs() as logs:
        async with api(settings) as (http, _):
            http._transport.app.state.backend = DownBackend([])  # type: ignore[attr-defined]
            ready = await http.get("/readyz")
            again = await http.get("/readyz")
            guest = (await http.get("/v1/agent/info", headers=bearer(keys["guest"]))).json()
            admin = (await http.get("/v1/agent/info", headers=bearer(keys["admin"]))).json()
    assert ready.status_code == 503
    assert ready.json() == {"status": "degraded", "checks": {"model": "not ready", "mcp_server": "ready"}}
    assert again.json() == ready.json()
    for internal in ("corp.internal", "11434", "8001", "http", "systemctl", "qwen3"):
        assert internal not in ready.text
    assert "readiness" not in guest and "corp.internal" not in json.dumps(guest)
    assert INTERNAL in admin["readiness"]["checks"]["model"]["detail"]
    assert admin["readiness"]["checks"]["mcp_server"]["url"] == "http://mcp-server.corp.internal:8001/mcp"
    logged = [e for e in logs if e["event"] == "component_not_ready"]
    assert len(logged) == 1 and INTERNAL in logged[0]["detail"]  # logged once, not on every probe


async def test_agent_info_lists_only_the_callers_own_tools(tmp_path: Path, keys: dict[str, str]) -> None:
    async with api(settings_for(tmp_path)) as (http, _):
        seen = {role: (await http.get("/v1/agent/info", headers=bearer(key))).json() for role, key in keys.items()}
    assert seen["guest"]["tools"] == [] and seen["guest"]["tool_sha256"] == {}
    assert seen["desk"]["tools"] == ["islem_hacmi", "pozisyon_dagilimi"]
    assert seen["admin"]["tools"] == ["islem_hacmi", "pozisyon_dagilimi", "sistem_bilgisi"]
    assert seen["guest"]["role"] == "guest" and "readiness" not in seen["desk"]


HOSTILE_HOSTS = [
    "mcp-server:8001.agent-api.evil.example",
    "localhost:8001.agent-api.evil.example",
    "127.0.0.1:1@agent-api.evil.example",
    "agent-api.evil.example",
    "mcp-server:",
]
HOSTILE_ORIGINS = [
    "http://localhost:8001.agent-api.evil.example",
    "http://mcp-server:8001.agent-api.evil.example",
    "http://127.0.0.1:1@agent-api.evil.example",
    "http://agent-api.evil.example",
]


@pytest.mark.parametrize("host", HOSTILE_HOSTS)
def test_a_host_that_merely_starts_like_an_allowed_one_is_refused(mcp_sqlite: ToolServer, host: str) -> None:
    assert post(mcp_sqlite, {"Host": host}).status_code == 421


@pytest.mark.parametrize("origin", HOSTILE_ORIGINS)
def test_an_origin_that_merely_starts_like_an_allowed_one_is_refused(mcp_sqlite: ToolServer, origin: str) -> None:
    assert post(mcp_sqlite, {"Origin": origin}).status_code == 403


def test_the_allowed_hosts_and_origins_still_pass(mcp_sqlite: ToolServer) -> None:
    for host in ("mcp-server:8001", "localhost", "127.0.0.1:65535", "[::1]:8001"):
        assert post(mcp_sqlite, {"Host": host}).status_code == 200, host
    assert post(mcp_sqlite, {"Origin": "http://localhost:8001"}).status_code == 200
