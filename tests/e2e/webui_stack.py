"""One Open WebUI process started the way the compose `webui` profile starts it, for tests/e2e/test_openwebui.py.

Its environment is the open-webui service's from `docker compose config`, verbatim except MOVED (where the
agent, the data and the secret files are on this machine); its command is the service's entrypoint script,
which reads the secret files and then runs `open-webui serve` instead of the image's start.sh.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

from tests.e2e.stack import REPO, run
from tests.e2e.webui_page import ANSWER_TEXT
from tests.support.procs import Proc, free_port, start

USERS = {"ayse@corp.example": "support", "mehmet@corp.example": "operations"}
CLOCK = {
    "when": {"user_contains": "saat", "last_role": "user", "has_tools": True},
    "reply": {"tool_calls": [{"name": "sistem_bilgisi", "arguments": {}}]},
}
# The model dies on these questions: before its first word, and after three words of an answer.
BROKEN = {
    "when": {"user_contains": "çöktü önce"},
    "reply": {"content": "hiç", "stream_error": {"after_tokens": 0, "message": "runner crashed"}},
}
BROKEN_MID = {
    "when": {"user_contains": "çöktü yarıda"},
    "reply": {"content": "Bekleyen çekim sayısı şu", "stream_error": {"after_tokens": 3, "message": "runner crashed"}},
}
# For Stop: a question whose first word is a minute away, and an answer slow enough (~1.5 s a word) that Stop
# lands mid-answer however loaded the machine (the user's question only: a title task never waits on them).
SLOW = {
    "when": {"user_contains": "yavaş soru", "has_tools": True},
    "reply": {"content": "Geç.", "first_token_delay": 60},
}
LONG = {
    "when": {"user_contains": "uzun soru", "has_tools": True},
    "reply": {"content": ANSWER_TEXT, "token_delay": 1.5},
}
# The only shipped variables the test changes (or adds): addresses and paths of this machine.
MOVED = frozenset({"OPENAI_API_BASE_URLS", "DATA_DIR", "LOCAL_AGENT_SECRETS"})
ROTATE_SCRIPT = REPO / "scripts/rotate-frontend"


class Front:
    """Open WebUI (one process at a time: `rotate` restarts it) in front of the agent at `agent`."""

    def __init__(self, service: dict[str, Any], binary: Path, agent: str, fake: str, tmp: Path, vault: Path) -> None:
        self.service, self.binary, self.agent, self.fake = service, binary, agent, fake
        self.tmp, self.vault = tmp, vault
        self.webui = f"http://127.0.0.1:{free_port()}"
        self.audit = tmp / "audit" / "audit.jsonl"
        self.admin_email: str = service["environment"]["WEBUI_ADMIN_EMAIL"]
        self.model: str = service["environment"]["DEFAULT_MODELS"]
        self.passwords: dict[str, str] = {}
        self.proc: Proc | None = None

    def __enter__(self) -> Front:
        self.start()
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.stop()

    def env(self) -> dict[str, str]:
        moved = {
            "OPENAI_API_BASE_URLS": f"{self.agent}/v1",
            "DATA_DIR": str(self.tmp / "webui"),
            "LOCAL_AGENT_SECRETS": str(self.vault),
        }
        assert set(moved) <= MOVED
        return {str(k): str(v) for k, v in self.service["environment"].items()} | moved

    def command(self) -> list[str]:
        """The service's entrypoint (the script file it mounts), with `open-webui serve` as its command."""
        interpreter, target = self.service["entrypoint"]
        (mount,) = [v for v in self.service["volumes"] if v["target"] == target]
        assert Path(mount["source"]) == REPO / "images/open-webui/start" and mount["read_only"], mount
        port = self.webui.rsplit(":", 1)[1]
        return [interpreter, mount["source"], str(self.binary), "serve", "--host", "127.0.0.1", "--port", port]

    def start(self) -> None:
        self.proc = start(self.command(), env=self.env(), ready_url=f"{self.webui}/health", timeout=900)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()
            self.proc = None

    @property
    def admin_password(self) -> str:
        return (self.vault / "webui-admin/password").read_text().strip()

    def key(self) -> str:
        return (self.vault / "webui/key").read_text().strip()

    def jwt_secret(self) -> str:
        return (self.vault / "frontend/jwt_secret").read_text().strip()

    def session(self, email: str, password: str) -> dict[str, str]:
        """Signed in through Open WebUI's API: the session header its page would send."""
        form = {"email": email, "password": password}
        signin = httpx.post(f"{self.webui}/api/v1/auths/signin", json=form, timeout=60)
        return {"Authorization": f"Bearer {signin.raise_for_status().json()['token']}"}

    def add_users(self) -> None:
        """The admin (from the secret) creates the analysts as ordinary users, as the admin panel does."""
        admin = self.session(self.admin_email, self.admin_password)
        for number, email in enumerate(USERS, start=1):
            self.passwords[email] = f"pw-{number}-{email}"
            user = {"name": email.split("@")[0], "email": email, "password": self.passwords[email], "role": "user"}
            httpx.post(f"{self.webui}/api/v1/auths/add", json=user, headers=admin, timeout=60).raise_for_status()

    def stream_chat(self, session: dict[str, str]) -> list[str]:
        body = {"model": self.model, "stream": True, "messages": [{"role": "user", "content": "Saat kaç?"}]}
        chunks: list[str] = []
        with httpx.stream("POST", f"{self.webui}/api/chat/completions", json=body, headers=session, timeout=120) as r:
            assert r.status_code == 200, r.read()
            for line in r.iter_lines():
                if line.startswith("data: {"):
                    delta = (json.loads(line[6:]).get("choices") or [{}])[0].get("delta") or {}
                    chunks += [delta["content"]] if delta.get("content") else []
        return chunks

    def rotate(self) -> None:
        """What scripts/rotate-frontend --jwt does in the stack, on these files: its agent-admin command, a new
        token secret from init-secrets, then Open WebUI restarted."""
        line = next(x for x in ROTATE_SCRIPT.read_text().splitlines() if "webui-key agent-admin" in x)
        args = shlex.split(line.split("webui-key", 1)[1].replace('"$name"', "openwebui"))
        args = [a.replace("/run/local-agent", str(self.vault)) for a in args]
        env = {"AGENT_KEYS_FILE": str(self.tmp / "keys.yaml"), "AGENT_POLICY_FILE": str(self.tmp / "policy.yaml")}
        run([str(Path(sys.executable).parent / args[0]), *args[1:]], env=env)
        rotate = {"SECRETS_DIR": str(self.vault), "ROTATE": "frontend"}
        run(["sh", str(REPO / "images/entrypoint/init-secrets")], env=rotate)
        self.stop()
        self.start()

    def check_users_and_tasks(self, audit_mark: int, sent_mark: int) -> None:
        """Both users audited apart with their policy roles, their client tasks too, served as shipped."""
        chats = [r for r in records(self, audit_mark) if r.get("kind") == "chat"]
        assert {(r["user"], r["role"], r["via"], r["auth"]) for r in chats} == {
            (email, role, "openwebui", "frontend") for email, role in USERS.items()
        }
        tasks = [r for r in records(self, audit_mark) if r.get("kind") == "client_task"]
        assert {r["user"] for r in tasks} == set(USERS) and all(r["question"] is None for r in tasks), tasks
        task_rounds = [r for r in sent(self, sent_mark) if r["messages"][0]["content"].startswith("### Task")]
        assert all("tools" not in r for r in task_rounds), task_rounds


def records(front: Front, since: int = 0) -> list[dict[str, Any]]:
    lines = front.audit.read_text().splitlines() if front.audit.exists() else []
    return [json.loads(line) for line in lines[since:]]


def sent(front: Front, since: int = 0) -> list[dict[str, Any]]:
    """The model requests the fake received (since the `since`-th)."""
    requests: list[dict[str, Any]] = httpx.get(f"{front.fake}/_fake/requests", timeout=10).json()
    return requests[since:]
