"""The shipped `webui` profile: a real Open WebUI (PyPI, pinned, cached venv from scripts/webui-venv) in front of
the agent, on loopback.

What is tested is what ships: the open-webui service's environment comes from `docker compose --profile webui
config`, verbatim but for the agent's address and the data directory, and Open WebUI starts through the same
entrypoint script (images/open-webui/start) over secret files made by the same one-shots (init-secrets, the
webui-key command). So sign-up is closed, the first admin comes from the generated password, every request
names its user in a signed token, and ordinary (non-admin) users chat — through Open WebUI's HTTP API and
through its page in headless Debian Chromium. The audit log names each user with the policy's role; the key
Open WebUI's admin can read names nobody; a rotation reaches Open WebUI and the old key is refused.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver

from agent.api.render_openai import UNFINISHED
from agent.errors import UpstreamError
from tests.e2e.stack import REPO, run
from tests.e2e.webui_page import ANSWER, ANSWER_TEXT, ask_in_page, focus_chat_box, log_in, page_text
from tests.e2e.webui_stack import BROKEN, BROKEN_MID, CLOCK, LONG, SLOW, USERS, Front, records, sent
from tests.support.browser import chromium, keep_evidence, missing, wait_for
from tests.support.procs import free_port, running, wait_until

# One Open WebUI start (and a restart for the rotation) takes 1-2 min on a quiet box, many more on a busy one.
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(2400)]
POLICY = REPO / "contract/src/agent_contract/policy.yaml"


def shipped() -> dict[str, Any]:
    """The compose file's services with the webui profile on, as an operator's `docker compose config` shows them."""
    out = run(
        ["docker", "compose", "-p", "la-webui", "-f", "docker-compose.yml", "config", "--format", "json"],
        env={"COMPOSE_PROFILES": "webui", "COMPOSE_BAKE": "false"},
    ).stdout
    services: dict[str, Any] = json.loads(out)["services"]
    return services


@pytest.fixture(scope="module")
def webui_bin() -> Path:
    """The pinned Open WebUI; the first run on a machine installs it (minutes), later runs reuse it."""
    done = subprocess.run([str(REPO / "scripts/webui-venv")], capture_output=True, text=True, timeout=2400)
    assert done.returncode == 0, done.stderr[-3000:]
    return Path(done.stdout.strip().splitlines()[-1]) / "bin/open-webui"


def make_secrets(tmp: Path, services: dict[str, Any]) -> Path:
    """The secret volumes, filled the way the stack fills them: init-secrets, then the webui-key command."""
    vault = tmp / "secrets"
    for name in ("mcp", "redis", "audit", "grafana", "frontend", "webui-admin", "webui"):
        (vault / name).mkdir(parents=True)
    run(["sh", str(REPO / "images/entrypoint/init-secrets")], env={"SECRETS_DIR": str(vault)})
    command = [a.replace("/run/local-agent", str(vault)) for a in services["webui-key"]["command"]]
    run([str(Path(sys.executable).parent / command[0]), *command[1:]], env=agent_admin_env(tmp))
    return vault


def agent_admin_env(tmp: Path) -> dict[str, str]:
    return {"AGENT_KEYS_FILE": str(tmp / "keys.yaml"), "AGENT_POLICY_FILE": str(tmp / "policy.yaml")}


@pytest.fixture(scope="module")
def front(webui_bin: Path, docker_ready: None) -> Iterator[Front]:
    services, tmp = shipped(), Path(tempfile.mkdtemp(prefix="openwebui-e2e-"))
    policy = yaml.safe_load(POLICY.read_text()) | {"users": USERS}
    (tmp / "policy.yaml").write_text(yaml.safe_dump(policy))
    vault = make_secrets(tmp, services)
    shipped_api = services["agent-api"]["environment"]
    o_port, m_port, a_port, token = free_port(), free_port(), free_port(), secrets.token_urlsafe(16)
    fake, agent = f"http://127.0.0.1:{o_port}", f"http://127.0.0.1:{a_port}"
    mcp_env = {"MCP_PORT": str(m_port), "MCP_TOKEN": token, "FILES_ROOT": str(tmp), "DATA_DIR": str(tmp / "mcp")}
    agent_env = agent_admin_env(tmp) | {
        "AGENT_HOST": "127.0.0.1",
        "AGENT_PORT": str(a_port),
        "OLLAMA_URL": fake,
        "MCP_URL": f"http://127.0.0.1:{m_port}/mcp",
        "MCP_TOKEN": token,
        "MODEL_BACKEND": "direct",
        "AUDIT_DIR": str(tmp / "audit"),
        "THINK_HOLDBACK_MODELS": "",
        # As shipped: api keys, the front-end's users signed with the secret init-secrets made, its task mode.
        "AGENT_AUTH": shipped_api["AGENT_AUTH"],
        "CLIENT_TASKS": shipped_api["CLIENT_TASKS"],
        "FRONTEND_JWT_SECRET_FILE": shipped_api["FRONTEND_JWT_SECRET_FILE"].replace("/run/local-agent", str(vault)),
    }
    with (
        running([sys.executable, "-m", "tests.fakes.fake_ollama", "--port", str(o_port)], ready_url=f"{fake}/"),
        running(["mcp-server"], env=mcp_env, ready_url=f"http://127.0.0.1:{m_port}/healthz", timeout=180),
        running(["agent-api"], env=agent_env, ready_url=f"{agent}/healthz", timeout=180),  # slow on a loaded box
    ):
        httpx.post(f"{fake}/_fake/script", json={"rules": [CLOCK, BROKEN, BROKEN_MID, SLOW, LONG], "default": ANSWER})
        webui = Front(services["open-webui"], webui_bin, agent, fake, tmp, vault)
        with webui:
            webui.add_users()
            yield webui


def test_the_profile_closes_sign_up_and_its_first_admin_comes_from_the_secret(front: Front) -> None:
    signup = {"name": "eve", "email": "eve@corp.example", "password": "pw-eve"}
    closed = httpx.post(f"{front.webui}/api/v1/auths/signup", json=signup, timeout=60)
    assert closed.status_code == 403, closed.text  # the published port makes nobody an account, let alone admin
    admin = front.session(front.admin_email, front.admin_password)
    me = httpx.get(f"{front.webui}/api/v1/auths/", headers=admin, timeout=60).json()
    assert me["role"] == "admin" and me["email"] == front.admin_email


def test_ordinary_users_chat_through_open_webuis_api_and_are_audited_apart(front: Front) -> None:
    audit_mark, sent_mark = len(records(front)), len(sent(front))
    for email in USERS:
        session = front.session(email, front.passwords[email])
        assert httpx.get(f"{front.webui}/api/v1/auths/", headers=session, timeout=60).json()["role"] == "user"
        models = httpx.get(f"{front.webui}/api/models", headers=session, timeout=60)
        assert front.model in [m["id"] for m in models.json()["data"]], models.text  # no grant needed: as shipped
        chunks = front.stream_chat(session)
        assert len(chunks) > 1 and "".join(chunks).endswith("Tools used: sistem_bilgisi"), chunks
        title = httpx.post(
            f"{front.webui}/api/v1/tasks/title/completions",
            json={"model": front.model, "messages": [{"role": "user", "content": "Saat kaç?"}], "chat_id": email},
            headers=session,
            timeout=120,
        )
        assert title.status_code == 200, title.text
    front.check_users_and_tasks(audit_mark, sent_mark)


def test_ordinary_users_chat_through_the_page_in_headless_chromium(front: Front, tmp_path: Path) -> None:
    if why := missing():
        pytest.fail(why)
    audit_mark, sent_mark = len(records(front)), len(sent(front))
    for email in USERS:
        with chromium(tmp_path / "profile") as page:
            try:
                log_in(page, front.webui, email, front.passwords[email])
                first_screen(page, front)
                shown, partial = ask_in_page(page, "Saat kaç?")
            except Exception:
                print(f"evidence: {keep_evidence(page, tmp_path, email.split('@')[0])}")
                raise
        assert ANSWER_TEXT in shown, shown
        # Streamed, not one block at the end. How many partial lengths a look catches depends on the machine's load
        # (a look took seconds at load 19): one is the proof.
        assert partial, "the answer did not grow in the page: it appeared whole"

    def tasks() -> set[str]:  # Open WebUI asks for follow-ups and the title after the answer, in the background
        return {r["user"] for r in records(front, audit_mark) if r.get("kind") == "client_task"}

    wait_until(lambda: tasks() >= set(USERS), 120, what="a background task of each user in the audit log")
    front.check_users_and_tasks(audit_mark, sent_mark)


def test_a_model_failure_reads_the_same_before_the_first_word_and_mid_answer_in_turkish(
    front: Front, tmp_path: Path
) -> None:
    if why := missing():
        pytest.fail(why)
    email = next(iter(USERS))
    text = f"⚠️ {UpstreamError.public_tr}"
    with chromium(tmp_path / "profile") as page:
        try:
            log_in(page, front.webui, email, front.passwords[email])
            for question in ("Model çöktü önce: kaç çekim onay bekliyor?", "Model çöktü yarıda: kaç çekim var?"):
                wait_for(page, focus_chat_box, 60, "a clickable chat box")
                shown = page_text(page).count(text)
                page.find_element(By.ID, "chat-input").send_keys(question, Keys.ENTER)
                wait_for(page, more_of(text, shown), 120, "the failure in the answer")
            assert "Bekleyen çekim" in page_text(page)  # the words before the failure stay, the text follows
            assert page_text(page).count(UNFINISHED["tr"]) == 2  # neither answer ended: both keep the mark
            assert "/readyz" not in page_text(page) and "logs" not in page_text(page)
        except Exception:
            print(f"evidence: {keep_evidence(page, tmp_path, 'failure')}")
            raise


def test_a_stopped_answer_is_marked_as_cut_after_a_reload_too_and_a_finished_one_is_not(
    front: Front, tmp_path: Path
) -> None:
    """Stop mid-answer and before the first word: the mark (in the question's language) stays, also in the saved
    chat; an answer that ended shows none."""
    if why := missing():
        pytest.fail(why)
    email, mark = next(iter(USERS)), UNFINISHED["tr"]
    with chromium(tmp_path / "profile") as page:
        try:
            log_in(page, front.webui, email, front.passwords[email])
            stop(page, "Uzun soru: saat kaç?", until="sunucu saatine")  # mid-answer: words shown, then Stop
            assert "olabilir." not in page_text(page)  # cut indeed
            reload(page, "sunucu saatine")
            assert page_text(page).count(mark) == 1
            page.get(f"{front.webui}/")  # a new chat
            stop(page, "Yavaş soru: kaç hesap var?", until=mark)  # before the first word: only the mark
            reload(page, "Yavaş soru")
            assert page_text(page).count(mark) == 1 and "Geç." not in page_text(page)
            page.get(f"{front.webui}/")
            ask_in_page(page, "Saat kaç?")
            wait_for(page, lambda p: mark not in page_text(p), 60, "the mark gone once the answer ended")
            reload(page, "Tools used: sistem_bilgisi")
            assert mark not in page_text(page) and ANSWER_TEXT in page_text(page)
        except Exception:
            print(f"evidence: {keep_evidence(page, tmp_path, 'stop')}")
            raise


def stop(page: WebDriver, question: str, until: str) -> None:
    """Ask, wait for `until` in the page, press Stop; returns once the answer is over and marked."""
    wait_for(page, focus_chat_box, 60, "a clickable chat box")
    page.find_element(By.ID, "chat-input").send_keys(question, Keys.ENTER)
    wait_for(page, lambda p: until in page_text(p), 120, f"{until!r} in the page")
    page.find_element(By.CSS_SELECTOR, 'button[aria-label="Stop"]').click()
    gone = 'button[aria-label="Stop"]'
    wait_for(page, lambda p: not p.find_elements(By.CSS_SELECTOR, gone), 60, "the answer stopped")
    assert UNFINISHED["tr"] in page_text(page)


def reload(page: WebDriver, text: str) -> None:
    """The chat as saved: the page loaded again from Open WebUI's database."""
    page.refresh()
    wait_for(page, lambda p: text in page_text(p), 90, f"the saved chat with {text!r}")


def more_of(text: str, seen: int) -> Callable[[WebDriver], bool]:
    return lambda page: page_text(page).count(text) > seen


def first_screen(page: WebDriver, front: Front) -> None:
    """A new analyst's first screen, as shipped: the product's suggested prompts, no release-notes window."""
    suggestions = json.loads(front.service["environment"]["DEFAULT_PROMPT_SUGGESTIONS"])
    wanted = [s["title"][1] for s in suggestions]
    wait_for(page, lambda p: all(w in page_text(p) for w in wanted), 60, "the product's suggested prompts")
    assert "kaç çekim onay bekliyor?" in wanted, wanted  # Turkish too
    assert "What's New" not in page_text(page) and not page.find_elements(By.XPATH, '//button[contains(., "Okay")]')


def test_the_key_open_webuis_admin_can_read_names_nobody(front: Front) -> None:
    admin = front.session(front.admin_email, front.admin_password)
    config = httpx.get(f"{front.webui}/openai/config", headers=admin, timeout=60).json()
    (key,) = config["OPENAI_API_KEYS"]
    assert key == front.key()  # Open WebUI shows its admin the connection key; alone it is worth nothing:
    body = {"model": front.model, "messages": [{"role": "user", "content": "Saat kaç?"}], "stream": True}
    for forged in ({"X-OpenWebUI-User-Email": "ayse@corp.example"}, {"X-OpenWebUI-User-Jwt": "e30.e30.forged"}):
        headers = {"Authorization": f"Bearer {key}"} | forged
        resp = httpx.post(f"{front.agent}/v1/chat/completions", json=body, headers=headers)
        assert resp.status_code == 401 and "token" in resp.text, resp.text  # "missing" or "invalid" user token


def test_rotation_reaches_open_webui_and_the_old_key_is_refused(front: Front) -> None:
    old_key, old_secret = front.key(), front.jwt_secret()
    front.rotate()  # what scripts/rotate-frontend --jwt runs, then Open WebUI restarted
    assert front.key() != old_key and front.jwt_secret() != old_secret
    body = {"model": front.model, "messages": [{"role": "user", "content": "Saat kaç?"}], "stream": False}
    refused = httpx.post(
        f"{front.agent}/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {old_key}"}
    )
    assert refused.status_code == 401, refused.text
    audit_mark = len(records(front))
    chunks = front.stream_chat(front.session("ayse@corp.example", front.passwords["ayse@corp.example"]))
    assert "".join(chunks).endswith("Tools used: sistem_bilgisi"), chunks
    chats = [r for r in records(front, audit_mark) if r.get("kind") == "chat"]
    assert [(r["user"], r["role"], r["status"]) for r in chats] == [("ayse@corp.example", "support", 200)]
