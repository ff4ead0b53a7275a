"""A model failure before the first token, on the chat screens' route (/api/chat streamed by a front-end key):
shown where the answer goes, in the question's language, as a failure mid-answer is; other clients keep the
HTTP status and error body of docs/api.md."""

from __future__ import annotations

import json
from pathlib import Path

from agent.errors import DependencyDown
from agent.security.auth import add_key
from tests.regressions.test_look_alike_identities import JWT, POLICY, SECRET, token
from tests.unit.agent.security.test_auth import api, bearer, settings_for


def ask(question: str) -> dict[str, object]:
    return {"model": "qwen3:4b", "messages": [{"role": "user", "content": question}], "stream": True}


async def test_a_chat_screen_reads_the_failure_before_the_first_token_as_chat_text(tmp_path: Path) -> None:
    (tmp_path / "policy.yaml").write_text(POLICY)
    key = add_key(tmp_path / "keys.yaml", "openwebui", "guest", frontend=True)
    down = DependencyDown("Ollama is unreachable at http://ollama:11434")
    async with api(settings_for(tmp_path, frontend_jwt_secret=SECRET), [down, down]) as (http, _):
        for question, text in (
            ("kaç çekim onay bekliyor?", DependencyDown.public_tr),
            ("how many?", DependencyDown.public),
        ):
            headers = bearer(key) | {JWT: token("ayse@example.com")}
            resp = await http.post("/api/chat", json=ask(question), headers=headers)
            assert resp.status_code == 200, resp.text
            lines = [json.loads(line) for line in resp.text.splitlines()]
            assert lines == [
                {
                    "model": "qwen3:4b",
                    "created_at": lines[0]["created_at"],
                    "done": False,
                    "message": {"role": "assistant", "content": f"⚠️ {text}"},
                },
                {"error": text},
            ]
            assert "ollama:11434" not in resp.text


async def test_other_clients_keep_the_http_status(tmp_path: Path) -> None:
    (tmp_path / "policy.yaml").write_text(POLICY)
    key = add_key(tmp_path / "keys.yaml", "script", "guest")
    down = DependencyDown("Ollama is unreachable at http://ollama:11434")
    async with api(settings_for(tmp_path), [down]) as (http, _):
        resp = await http.post("/api/chat", json=ask("kaç çekim onay bekliyor?"), headers=bearer(key))
    assert resp.status_code == 503 and resp.json() == {"error": DependencyDown.public}
