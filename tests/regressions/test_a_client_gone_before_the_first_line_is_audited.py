"""Regression: a chat screen whose client left before its stream's first line left no audit record. The stream
opens with the screen's status line before it pulls the loop's events, so the audit trail's generator, whose
`finally` writes the record, never started. Every request leaves one record however it ends: here 499,
`client_closed`, written before the response ends."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from starlette.types import ASGIApp, Message

from agent.api.app import create_app
from agent.security.audit_check import records
from agent.security.auth import add_key
from tests.regressions.test_look_alike_identities import JWT, POLICY, SECRET, token
from tests.unit.agent.conftest import MemoryToolBox, ScriptedBackend
from tests.unit.agent.security.test_auth import api, bearer, settings_for

JSON = {"Content-Type": "application/json"}
ASK = {"model": "qwen3:4b", "messages": [{"role": "user", "content": "how many?"}], "stream": True}


async def leave_at_the_first_line(app: ASGIApp, path: str, headers: dict[str, str]) -> None:
    """Drive the app as uvicorn does (ASGI spec 2.3) for a client gone at the answer's first line: that line is
    never taken (its `send` does not return) and the next `receive` is the disconnect."""
    first_line, asked = asyncio.Event(), False
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(k.lower().encode(), v.encode()) for k, v in (headers | JSON).items()],
        "client": ("127.0.0.1", 5000),
        "server": ("agent", 80),
    }

    async def receive() -> Message:
        nonlocal asked
        if not asked:
            asked = True
            return {"type": "http.request", "body": json.dumps(ASK).encode(), "more_body": False}
        await first_line.wait()
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        if message["type"] == "http.response.body":
            first_line.set()
            await asyncio.Future()  # nobody reads it

    await app(scope, receive, send)


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/api/chat"])
@pytest.mark.parametrize("screen", [True, False], ids=["chat-screen", "api-key"])
async def test_a_client_gone_before_the_first_line_leaves_one_499_record(
    tmp_path: Path, path: str, screen: bool
) -> None:
    (tmp_path / "policy.yaml").write_text(POLICY)
    key = add_key(tmp_path / "keys.yaml", "openwebui", "guest", frontend=screen)
    headers = bearer(key) | ({JWT: token("ayse@example.com")} if screen else {})
    app = create_app(
        settings_for(tmp_path, frontend_jwt_secret=SECRET),
        backend=ScriptedBackend(["Two pending."]),
        toolbox=MemoryToolBox(),  # type: ignore[arg-type]
    )
    async with app.router.lifespan_context(app):
        await leave_at_the_first_line(app, path, headers)
        audited = [r for r in records(tmp_path / "audit") if r["event"] == "request"]  # as the response ended
    assert [(r["endpoint"], r["status"], r["error"]) for r in audited] == [(path, 499, "client_closed")]
    assert audited[0]["user"] == ("ayse@example.com" if screen else "openwebui")


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/api/chat"])
@pytest.mark.parametrize("screen", [True, False], ids=["chat-screen", "api-key"])
async def test_a_stream_read_to_its_end_leaves_one_200_record(tmp_path: Path, path: str, screen: bool) -> None:
    """The answer closing its events as it ends writes no second record."""
    (tmp_path / "policy.yaml").write_text(POLICY)
    key = add_key(tmp_path / "keys.yaml", "openwebui", "guest", frontend=screen)
    headers = bearer(key) | ({JWT: token("ayse@example.com")} if screen else {})
    async with api(settings_for(tmp_path, frontend_jwt_secret=SECRET), ["Two pending."]) as (http, _):
        resp = await http.post(path, json=ASK, headers=headers)
    assert resp.status_code == 200 and "Two" in resp.text
    audited = [r for r in records(tmp_path / "audit") if r["event"] == "request"]
    assert [(r["endpoint"], r["status"], r["error"]) for r in audited] == [(path, 200, None)]
