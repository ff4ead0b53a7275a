"""A real Open WebUI (PyPI, pinned, cached venv from scripts/webui-venv) in front of the agent, on loopback.

Two Open WebUI users chat through the agent's Ollama connection with the front-end key, the way the `webui`
compose profile wires it (forwarded user headers, offline settings). Driven through Open WebUI's own HTTP API
(the endpoints its web page calls), not a browser: the answer streams with the footer, the audit log names
each user with the role the policy maps them to, and Open WebUI's title task reaches the model with no tools.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from agent.security.auth import add_key
from tests.e2e.stack import REPO
from tests.support.procs import free_port, running

pytestmark = pytest.mark.e2e
POLICY = REPO / "contract/src/agent_contract/policy.yaml"
USERS = {"ayse@corp.example": "support", "mehmet@corp.example": "operations"}
OFFLINE = {
    "OFFLINE_MODE": "true",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "RAG_EMBEDDING_MODEL_AUTO_UPDATE": "false",
    "RAG_RERANKING_MODEL_AUTO_UPDATE": "false",
    "WHISPER_MODEL_AUTO_UPDATE": "false",
    "ENABLE_VERSION_UPDATE_CHECK": "false",
    "ANONYMIZED_TELEMETRY": "false",
    "SCARF_NO_ANALYTICS": "true",
    "DO_NOT_TRACK": "true",
}
CLOCK = {
    "when": {"user_contains": "saat", "last_role": "user", "has_tools": True},
    "reply": {"tool_calls": [{"name": "sistem_bilgisi", "arguments": {}}]},
}


@dataclass
class Front:
    webui: str
    fake: str
    audit: Path


@pytest.fixture(scope="module")
def webui_bin() -> Path:
    """The pinned Open WebUI; the first run on a machine installs it (minutes), later runs reuse it."""
    done = subprocess.run([str(REPO / "scripts/webui-venv")], capture_output=True, text=True, timeout=2400)
    assert done.returncode == 0, done.stderr[-3000:]
    return Path(done.stdout.strip().splitlines()[-1]) / "bin/open-webui"


@pytest.fixture(scope="module")
def front(webui_bin: Path) -> Iterator[Front]:
    tmp = Path(tempfile.mkdtemp(prefix="openwebui-e2e-"))
    policy = yaml.safe_load(POLICY.read_text()) | {"users": USERS}
    (tmp / "policy.yaml").write_text(yaml.safe_dump(policy))
    key = add_key(tmp / "keys.yaml", "openwebui", "guest", frontend=True)
    o_port, m_port, a_port, w_port, token = (
        free_port(),
        free_port(),
        free_port(),
        free_port(),
        secrets.token_urlsafe(16),
    )
    fake, agent, webui = (f"http://127.0.0.1:{p}" for p in (o_port, a_port, w_port))
    mcp_env = {"MCP_PORT": str(m_port), "MCP_TOKEN": token, "FILES_ROOT": str(tmp), "DATA_DIR": str(tmp / "mcp")}
    agent_env = {
        "AGENT_HOST": "127.0.0.1",
        "AGENT_PORT": str(a_port),
        "OLLAMA_URL": fake,
        "MCP_URL": f"http://127.0.0.1:{m_port}/mcp",
        "MCP_TOKEN": token,
        "MODEL_BACKEND": "direct",
        "AGENT_AUTH": "api_key",
        "AGENT_KEYS_FILE": str(tmp / "keys.yaml"),
        "AGENT_POLICY_FILE": str(tmp / "policy.yaml"),
        "AUDIT_DIR": str(tmp / "audit"),
        "THINK_HOLDBACK_MODELS": "",
    }
    webui_env = OFFLINE | {
        "DATA_DIR": str(tmp / "webui"),
        "WEBUI_SECRET_KEY": secrets.token_urlsafe(24),
        "ENABLE_OLLAMA_API": "true",
        "OLLAMA_BASE_URL": agent,
        "OLLAMA_API_CONFIGS": json.dumps({"0": {"key": key}}),
        "ENABLE_OPENAI_API": "false",
        "ENABLE_FORWARD_USER_INFO_HEADERS": "true",
        "BYPASS_MODEL_ACCESS_CONTROL": "true",  # every signed-in user may use the agent's models
    }
    with (
        running([sys.executable, "-m", "tests.fakes.fake_ollama", "--port", str(o_port)], ready_url=f"{fake}/"),
        running(["mcp-server"], env=mcp_env, ready_url=f"http://127.0.0.1:{m_port}/healthz", timeout=60),
        running(["agent-api"], env=agent_env, ready_url=f"{agent}/healthz"),
        running(
            [str(webui_bin), "serve", "--host", "127.0.0.1", "--port", str(w_port)],
            env=webui_env,
            ready_url=f"{webui}/health",
            timeout=300,
        ),
    ):
        httpx.post(f"{fake}/_fake/script", json={"rules": [CLOCK], "default": {"content": "Saat 14:05."}})
        yield Front(webui, fake, tmp / "audit" / "audit.jsonl")


def sign_in(front: Front) -> dict[str, str]:
    """The first account is Open WebUI's admin (ayse), who adds mehmet as a plain user: both sign in."""
    tokens: dict[str, str] = {}
    with httpx.Client(base_url=front.webui, timeout=60) as http:
        first = http.post(
            "/api/v1/auths/signup", json={"name": "ayse", "email": "ayse@corp.example", "password": "pw-1"}
        )
        tokens["ayse@corp.example"] = first.raise_for_status().json()["token"]
        admin = {"Authorization": f"Bearer {tokens['ayse@corp.example']}"}
        user = {"name": "mehmet", "email": "mehmet@corp.example", "password": "pw-2", "role": "user"}
        http.post("/api/v1/auths/add", json=user, headers=admin).raise_for_status()
        signin = http.post("/api/v1/auths/signin", json={"email": user["email"], "password": user["password"]})
        tokens["mehmet@corp.example"] = signin.raise_for_status().json()["token"]
    return tokens


def stream_chat(front: Front, token: str) -> list[str]:
    body = {"model": "qwen3:4b", "stream": True, "messages": [{"role": "user", "content": "Saat kaç?"}]}
    chunks: list[str] = []
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.stream("POST", f"{front.webui}/api/chat/completions", json=body, headers=headers, timeout=120) as resp:
        assert resp.status_code == 200, resp.read()
        for line in resp.iter_lines():
            if line.startswith("data: {"):
                delta = (json.loads(line[6:]).get("choices") or [{}])[0].get("delta") or {}
                chunks += [delta["content"]] if delta.get("content") else []
    return chunks


def records(front: Front) -> list[dict[str, Any]]:
    return [json.loads(line) for line in front.audit.read_text().splitlines()]


def test_two_open_webui_users_are_two_agent_users_and_tasks_get_no_tools(front: Front) -> None:
    tokens = sign_in(front)
    for email, token in tokens.items():
        models = httpx.get(f"{front.webui}/api/models", headers={"Authorization": f"Bearer {token}"}, timeout=60)
        assert "qwen3:4b" in [m["id"] for m in models.json()["data"]], models.text  # the page loads them first
        chunks = stream_chat(front, token)
        assert len(chunks) > 1 and "".join(chunks).endswith("Tools used: sistem_bilgisi"), chunks
        title = httpx.post(
            f"{front.webui}/api/v1/tasks/title/completions",
            json={"model": "qwen3:4b", "messages": [{"role": "user", "content": "Saat kaç?"}], "chat_id": email},
            headers={"Authorization": f"Bearer {token}"},
            timeout=120,
        )
        assert title.status_code == 200, title.text
    chats = [r for r in records(front) if r.get("kind") == "chat"]
    assert {(r["user"], r["role"], r["via"]) for r in chats} == {
        ("ayse@corp.example", "support", "openwebui"),  # Open WebUI's admin: still only the policy's role
        ("mehmet@corp.example", "operations", "openwebui"),
    }
    tasks = [r for r in records(front) if r.get("kind") == "client_task"]
    assert sorted(r["user"] for r in tasks) == sorted(USERS) and all(r["question"] is None for r in tasks)
    sent = httpx.get(f"{front.fake}/_fake/requests", timeout=10).json()
    task_rounds = [r for r in sent if r["messages"] and r["messages"][0]["content"].startswith("### Task")]
    assert len(task_rounds) == 2 and all("tools" not in r for r in task_rounds)
