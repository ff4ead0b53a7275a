"""Per-user identity through a front-end (Open WebUI's forwarded user headers), with the attacks.

Only a key flagged as a front-end's (`agent-admin keys add openwebui --role guest --frontend`) may name the
end user; each user is then distinct in the audit log and the rate limit, and gets the role the operator's
policy maps them to (`users:`), else the key's role — never the role the front-end's header claims.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from agent.security.auth import add_key
from tests.integration.conftest import FakeOllama, McpServer
from tests.support.procs import free_port, running

pytestmark = pytest.mark.integration
POLICY = Path(__file__).resolve().parents[2] / "contract/src/agent_contract/policy.yaml"


@dataclass
class Front:
    url: str
    frontend_key: str
    plain_key: str
    audit_dir: Path

    def chat(self, key: str | None, **headers: str) -> httpx.Response:
        auth = {"Authorization": f"Bearer {key}"} if key else {}
        body = {"model": "qwen3:4b", "messages": [{"role": "user", "content": "hello"}], "stream": False}
        return httpx.post(f"{self.url}/api/chat", json=body, headers=auth | headers, timeout=30)

    def audit(self) -> list[dict[str, Any]]:
        return [json.loads(x) for x in (self.audit_dir / "audit.jsonl").read_text().splitlines()]


def user(email: str, role: str = "user") -> dict[str, str]:
    """The headers Open WebUI sends with ENABLE_FORWARD_USER_INFO_HEADERS=true."""
    return {
        "X-OpenWebUI-User-Name": email.split("@")[0],
        "X-OpenWebUI-User-Id": f"id-{email}",
        "X-OpenWebUI-User-Email": email,
        "X-OpenWebUI-User-Role": role,
    }


@pytest.fixture(scope="module")
def front(fake_ollama: FakeOllama, mcp_server: McpServer) -> Iterator[Front]:
    tmp = Path(tempfile.mkdtemp(prefix="frontend-"))
    policy = yaml.safe_load(POLICY.read_text())
    policy["users"] = {"ayse@corp.example": "support", "*@ops.corp.example": "operations"}
    (tmp / "policy.yaml").write_text(yaml.safe_dump(policy))
    frontend_key = add_key(tmp / "keys.yaml", "openwebui", "guest", frontend=True)
    plain_key = add_key(tmp / "keys.yaml", "analyst", "operations")
    port = free_port()
    env = {
        "AGENT_HOST": "127.0.0.1",
        "AGENT_PORT": str(port),
        "OLLAMA_URL": fake_ollama.url,
        "MCP_URL": mcp_server.url,
        "MCP_TOKEN": mcp_server.token,
        "MODEL_BACKEND": "direct",
        "AGENT_AUTH": "api_key",
        "AGENT_KEYS_FILE": str(tmp / "keys.yaml"),
        "AGENT_POLICY_FILE": str(tmp / "policy.yaml"),
        "AUDIT_DIR": str(tmp / "audit"),
        "RATE_LIMIT_PER_MINUTE": "3",
        "RATE_LIMIT_BACKEND": "memory",
        "TOOL_RETRIEVAL": "off",  # the role's whole list is what these tests check
    }
    with running(["agent-api"], env=env, ready_url=f"http://127.0.0.1:{port}/healthz"):
        yield Front(f"http://127.0.0.1:{port}", frontend_key, plain_key, tmp / "audit")


def offered(fake: FakeOllama) -> list[str]:
    return sorted(t["function"]["name"] for t in fake.requests()[-1].get("tools") or [])


def test_each_front_end_user_is_audited_with_the_policy_role(front: Front, ollama: FakeOllama) -> None:
    assert front.chat(front.frontend_key, **user("ayse@corp.example")).status_code == 200
    assert "musteri_bakiyesi" in offered(ollama)  # support
    assert front.chat(front.frontend_key, **user("mehmet@ops.corp.example")).status_code == 200
    assert "musteri_bakiyesi" not in offered(ollama) and "kyc_ozeti" in offered(ollama)  # operations
    ayse, mehmet = front.audit()[-2:]
    assert (ayse["user"], ayse["role"], ayse["auth"], ayse["via"]) == (
        "ayse@corp.example",
        "support",
        "frontend",
        "openwebui",
    )
    assert (mehmet["user"], mehmet["role"]) == ("mehmet@ops.corp.example", "operations")


def test_the_front_ends_admin_role_header_grants_nothing(front: Front, ollama: FakeOllama) -> None:
    assert front.chat(front.frontend_key, **user("boss@corp.example", role="admin")).status_code == 200
    assert offered(ollama) == []  # unmapped: the key's role (guest), whatever Open WebUI calls the user
    record = front.audit()[-1]
    assert record["user"] == "boss@corp.example" and record["role"] == "guest"


def test_only_a_front_end_key_can_name_a_user(front: Front, ollama: FakeOllama) -> None:
    assert front.chat(front.plain_key, **user("ayse@corp.example", role="admin")).status_code == 200
    record = front.audit()[-1]
    assert (record["user"], record["role"], record["auth"], record["via"]) == ("analyst", "operations", "api_key", None)
    assert front.chat(None, **user("ayse@corp.example")).status_code == 401  # headers alone are nobody
    assert front.audit()[-1]["user"] is None


def test_a_front_end_request_without_a_user_is_the_front_end_itself(front: Front, ollama: FakeOllama) -> None:
    assert front.chat(front.frontend_key).status_code == 200
    record = front.audit()[-1]
    assert (record["user"], record["role"], record["auth"]) == ("openwebui", "guest", "api_key")


def test_each_user_has_their_own_rate_limit(front: Front, ollama: FakeOllama) -> None:
    noisy = user("noisy@corp.example")
    statuses = [front.chat(front.frontend_key, **noisy).status_code for _ in range(4)]
    assert statuses == [200, 200, 200, 429]
    assert front.chat(front.frontend_key, **user("quiet@corp.example")).status_code == 200
    assert front.audit()[-2]["user"] == "noisy@corp.example" and front.audit()[-2]["status"] == 429
