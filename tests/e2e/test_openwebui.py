"""A real Open WebUI (PyPI, pinned, cached venv from scripts/webui-venv) in front of the agent, on loopback.

Two Open WebUI users chat through the agent's Ollama connection with the front-end key, the way the `webui`
compose profile wires it (forwarded user headers, offline settings). Driven twice on one Open WebUI process:
through its HTTP API (the endpoints its page calls), then through the page in headless Debian Chromium (sign-in
form, chat box). Both times the answer carries the footer, the audit log names each user with the role the
policy maps them to, and Open WebUI's background tasks reach the model with no tools.
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
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver

from agent.security.auth import add_key
from tests.e2e.stack import REPO
from tests.support.browser import chromium, keep_evidence, missing, wait_for
from tests.support.procs import free_port, running, wait_until

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

# Long and slow enough (~4 s) that the page shows it growing word by word: streaming, not a block at the end.
ANSWER_TEXT = (
    "Saat 14:05, sunucu saatine göre. Bu bilgi sistem bilgisi aracından geldi ve sunucunun kendi saat "
    "dilimine göre verildi; bilgisayarınızdaki saat biraz farklı olabilir."
)
ANSWER = {"content": ANSWER_TEXT, "token_delay": 0.15}


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
        "DEFAULT_MODELS": "qwen3:4b",  # the chat page opens on the agent's model
    }
    with (
        running([sys.executable, "-m", "tests.fakes.fake_ollama", "--port", str(o_port)], ready_url=f"{fake}/"),
        running(["mcp-server"], env=mcp_env, ready_url=f"http://127.0.0.1:{m_port}/healthz", timeout=60),
        running(["agent-api"], env=agent_env, ready_url=f"{agent}/healthz", timeout=90),  # slow on a loaded box
        running(
            [str(webui_bin), "serve", "--host", "127.0.0.1", "--port", str(w_port)],
            env=webui_env,
            ready_url=f"{webui}/health",
            timeout=300,
        ),
    ):
        httpx.post(f"{fake}/_fake/script", json={"rules": [CLOCK], "default": ANSWER})
        yield Front(webui, fake, tmp / "audit" / "audit.jsonl")


@pytest.fixture(scope="module")
def accounts(front: Front) -> dict[str, str]:
    """The first account is Open WebUI's admin (ayse), who adds mehmet as a plain user: email -> password."""
    passwords = {"ayse@corp.example": "pw-1", "mehmet@corp.example": "pw-2"}
    with httpx.Client(base_url=front.webui, timeout=60) as http:
        first = {"name": "ayse", "email": "ayse@corp.example", "password": passwords["ayse@corp.example"]}
        token = http.post("/api/v1/auths/signup", json=first).raise_for_status().json()["token"]
        admin = {"Authorization": f"Bearer {token}"}
        user = {"name": "mehmet", "email": "mehmet@corp.example", "password": passwords["mehmet@corp.example"]}
        http.post("/api/v1/auths/add", json=user | {"role": "user"}, headers=admin).raise_for_status()
    return passwords


def sign_in(front: Front, accounts: dict[str, str]) -> dict[str, str]:
    """Both users sign in through Open WebUI's API: email -> session token."""
    tokens: dict[str, str] = {}
    with httpx.Client(base_url=front.webui, timeout=60) as http:
        for email, password in accounts.items():
            signin = http.post("/api/v1/auths/signin", json={"email": email, "password": password})
            tokens[email] = signin.raise_for_status().json()["token"]
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


def records(front: Front, since: int = 0) -> list[dict[str, Any]]:
    lines = front.audit.read_text().splitlines() if front.audit.exists() else []
    return [json.loads(line) for line in lines[since:]]


def sent(front: Front, since: int = 0) -> list[dict[str, Any]]:
    """The model requests the fake received (since the `since`-th)."""
    requests: list[dict[str, Any]] = httpx.get(f"{front.fake}/_fake/requests", timeout=10).json()
    return requests[since:]


def check_two_users(front: Front, audit_mark: int, sent_mark: int) -> list[dict[str, Any]]:
    """Both users audited apart with their policy roles, their client tasks too; returns the task rounds."""
    chats = [r for r in records(front, audit_mark) if r.get("kind") == "chat"]
    assert {(r["user"], r["role"], r["via"]) for r in chats} == {
        ("ayse@corp.example", "support", "openwebui"),  # Open WebUI's admin: still only the policy's role
        ("mehmet@corp.example", "operations", "openwebui"),
    }
    tasks = [r for r in records(front, audit_mark) if r.get("kind") == "client_task"]
    assert {r["user"] for r in tasks} == set(USERS) and all(r["question"] is None for r in tasks), tasks
    task_rounds = [r for r in sent(front, sent_mark) if r["messages"][0]["content"].startswith("### Task")]
    assert task_rounds and all("tools" not in r for r in task_rounds), task_rounds
    return task_rounds


def test_two_open_webui_users_are_two_agent_users_and_tasks_get_no_tools(
    front: Front, accounts: dict[str, str]
) -> None:
    audit_mark, sent_mark = len(records(front)), len(sent(front))
    for email, token in sign_in(front, accounts).items():
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
    assert len(check_two_users(front, audit_mark, sent_mark)) == len(USERS)


def page_text(page: WebDriver) -> str:
    return str(page.find_element(By.TAG_NAME, "body").text)


def log_in(page: WebDriver, webui: str, email: str, password: str) -> None:
    """Through Open WebUI's sign-in form, as a person would; ends on the chat page."""
    page.get(f"{webui}/auth")
    wait_for(page, lambda p: p.find_element(By.CSS_SELECTOR, "input[type=email]"), 90, "the sign-in form")
    page.find_element(By.CSS_SELECTOR, "input[type=email]").send_keys(email)
    page.find_element(By.CSS_SELECTOR, "input[type=password]").send_keys(password)
    page.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait_for(page, lambda p: p.find_element(By.ID, "chat-input").is_displayed(), 90, "the chat box")


def focus_chat_box(page: WebDriver) -> bool:
    """Close the "What's New" notes a new account gets (they cover the page), then click into the chat box."""
    for notes in page.find_elements(By.XPATH, '//button[contains(., "Okay, Let\'s Go!")]'):
        notes.click()
    page.find_element(By.ID, "chat-input").click()  # raises (and is retried) while something covers it
    return True


def words_shown(text: str) -> int:
    """How many leading words of the answer the page shows."""
    words = ANSWER_TEXT.split()
    return max((k for k in range(1, len(words) + 1) if " ".join(words[:k]) in text), default=0)


def ask_in_page(page: WebDriver, question: str) -> tuple[str, set[int]]:
    """Type into the chat box and send; returns the page text once the answer's footer is there, and every
    partial length (in words) the answer was seen at on the way."""
    wait_for(page, focus_chat_box, 60, "a clickable chat box")
    page.find_element(By.ID, "chat-input").send_keys(question, Keys.ENTER)
    seen: set[int] = set()

    def answered(p: WebDriver) -> bool:
        text = page_text(p)
        seen.add(words_shown(text))
        return "Tools used: sistem_bilgisi" in text

    wait_for(page, answered, 120, "the answer with its footer")
    return page_text(page), seen - {0, len(ANSWER_TEXT.split())}


def test_two_users_chat_through_the_page_in_headless_chromium(
    front: Front, accounts: dict[str, str], tmp_path: Path
) -> None:
    if why := missing():
        pytest.fail(why)
    audit_mark, sent_mark = len(records(front)), len(sent(front))
    for email, password in accounts.items():
        with chromium(tmp_path / "profile") as page:
            try:
                log_in(page, front.webui, email, password)
                shown, partial = ask_in_page(page, "Saat kaç?")
            except Exception:
                print(f"evidence: {keep_evidence(page, tmp_path, email.split('@')[0])}")
                raise
        assert ANSWER_TEXT in shown, shown
        assert len(partial) >= 3, f"the answer did not grow in the page: partial lengths seen {sorted(partial)}"
    # Open WebUI asks for the chat's title after the answer, in the background: wait for both users' tasks.

    def tasks() -> set[str]:
        return {r["user"] for r in records(front, audit_mark) if r.get("kind") == "client_task"}

    wait_until(lambda: tasks() >= set(USERS), 120, what="a background task of each user in the audit log")
    check_two_users(front, audit_mark, sent_mark)
