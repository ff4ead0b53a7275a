"""The chat screens' route on an OpenAI connection (/v1/chat/completions streamed by a front-end key naming its
user): the stream opens with an "answer not finished" status in the question's language and hides it at the
answer's end, so a stopped answer keeps the mark (docs/open-webui.md); a failure reads as answer text there,
before the first token too. Every other client gets the stream and errors of docs/api.md, without the status."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agent.api.render_openai import UNFINISHED
from agent.errors import DependencyDown
from agent.security.auth import add_key
from tests.regressions.test_look_alike_identities import JWT, POLICY, SECRET, token
from tests.unit.agent.security.test_auth import api, bearer, settings_for

DOWN = "Ollama is unreachable at http://ollama:11434"


def ask(question: str) -> dict[str, object]:
    return {"model": "qwen3:4b", "messages": [{"role": "user", "content": question}], "stream": True}


def chunks(text: str) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in text.split("\n\n") if line.startswith("data: {")]


def statuses(data: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [d["event"]["data"] for d in data if "event" in d]


def content(data: list[dict[str, Any]]) -> str:
    return "".join(d["choices"][0]["delta"].get("content", "") for d in data if d["choices"])


async def test_a_chat_screens_stream_carries_the_unfinished_mark_until_its_end(tmp_path: Path) -> None:
    (tmp_path / "policy.yaml").write_text(POLICY)
    key = add_key(tmp_path / "keys.yaml", "openwebui", "guest", frontend=True)
    async with api(settings_for(tmp_path, frontend_jwt_secret=SECRET), ["İki bekliyor.", "Two pending."]) as (
        http,
        _,
    ):
        for question, language in (("kaç çekim onay bekliyor?", "tr"), ("how many withdrawals wait?", "en")):
            headers = bearer(key) | {JWT: token("ayse@example.com")}
            resp = await http.post("/v1/chat/completions", json=ask(question), headers=headers)
            assert resp.status_code == 200, resp.text
            data = chunks(resp.text)
            # The mark first, before the first word (a stop before it still leaves the mark) …
            assert data[0]["choices"] == [] and data[0]["event"] == {
                "type": "status",
                "data": {"description": UNFINISHED[language], "done": True},
            }
            # … hidden once the answer ended: after its last word, before its end chunk.
            assert statuses(data) == [
                {"description": UNFINISHED[language], "done": True},
                {"description": "", "done": True, "hidden": True},
            ]
            hidden = next(i for i, d in enumerate(data) if d.get("event", {}).get("data", {}).get("hidden"))
            assert content(data[:hidden]) == content(data) and content(data).startswith(("İki", "Two"))
            assert data[hidden + 1]["choices"][0]["finish_reason"] == "stop"
            assert resp.text.endswith("data: [DONE]\n\n")


async def test_a_chat_screen_reads_a_failure_before_the_first_token_as_answer_text_and_keeps_the_mark(
    tmp_path: Path,
) -> None:
    (tmp_path / "policy.yaml").write_text(POLICY)
    key = add_key(tmp_path / "keys.yaml", "openwebui", "guest", frontend=True)
    down = DependencyDown(DOWN)
    async with api(settings_for(tmp_path, frontend_jwt_secret=SECRET), [down, down]) as (http, _):
        for question, text, language in (
            ("kaç çekim onay bekliyor?", DependencyDown.public_tr, "tr"),
            ("how many?", DependencyDown.public, "en"),
        ):
            headers = bearer(key) | {JWT: token("ayse@example.com")}
            resp = await http.post("/v1/chat/completions", json=ask(question), headers=headers)
            assert resp.status_code == 200, resp.text
            data = chunks(resp.text)
            assert statuses(data) == [{"description": UNFINISHED[language], "done": True}]  # not finished: stays
            assert content(data) == f"⚠️ {text}" and "error" not in resp.text
            assert "ollama:11434" not in resp.text and resp.text.endswith("data: [DONE]\n\n")


async def test_other_clients_get_no_mark_and_keep_the_http_status(tmp_path: Path) -> None:
    """An API key, and the front-end's own key naming nobody (no signed token configured): as before."""
    (tmp_path / "policy.yaml").write_text(POLICY)
    script = add_key(tmp_path / "keys.yaml", "script", "guest")
    front = add_key(tmp_path / "keys.yaml", "openwebui", "guest", frontend=True)
    async with api(settings_for(tmp_path), ["İki bekliyor.", "İki bekliyor.", DependencyDown(DOWN)]) as (http, _):
        for key in (script, front):
            resp = await http.post("/v1/chat/completions", json=ask("kaç çekim onay bekliyor?"), headers=bearer(key))
            data = chunks(resp.text)
            assert resp.status_code == 200 and '"event"' not in resp.text and statuses(data) == []
            assert data[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
            assert content(data) == "İki bekliyor." and resp.text.endswith("data: [DONE]\n\n")
        resp = await http.post("/v1/chat/completions", json=ask("kaç çekim onay bekliyor?"), headers=bearer(script))
    assert resp.status_code == 503 and resp.json()["error"]["message"] == DependencyDown.public
