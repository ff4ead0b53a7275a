"""Regression (issue 26, finding 3): a page on any intranet site made a signed-in user's browser POST a
`text/plain`, form or multipart body through the SSO proxy; the agent parsed it as JSON and ran the tool
loop (a note was planted in the user's name). A browser sends such bodies without a CORS preflight.

Now a POST body must be declared JSON (`application/json` or `…+json`) or it is a 415, and in
trusted_header mode a request whose `Origin` is not in ALLOWED_ORIGINS is a 403 — both before the model or
any tool is asked, in each API's own error shape.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent.security.audit_check import records
from agent.security.auth import add_key
from tests.unit.agent.security.test_auth import ASK, POLICY, api, bearer, settings_for

PLANT: list[tuple[str, dict[str, Any]]] = [("sistem_bilgisi", {})]  # the scripted model obeys the page: it calls a tool
PAGE = "http://wiki.intranet.example"
FRONT_END = "https://chat.intranet.example"
SSO = {"X-Forwarded-User": "ayse@example.com", "X-Forwarded-Groups": "cn=traders"}
PROXY = ("10.1.0.3", 4000)
BODY = json.dumps(ASK)
CROSS_SITE: dict[str, dict[str, Any]] = {  # what an HTML form or a no-cors fetch() can send
    "text_plain": {"content": BODY, "headers": {"Content-Type": "text/plain"}},
    "form": {"content": BODY[:-1] + ', "x": "="}', "headers": {"Content-Type": "application/x-www-form-urlencoded"}},
    "multipart": {"files": {"x": ("a.json", BODY.encode(), "application/json")}},
    "no_type": {"content": BODY, "headers": {}},
}
PATHS = {"/v1/chat/completions": "openai", "/api/chat": "ollama", "/api/show": "ollama"}


@pytest.fixture
def tmp(tmp_path: Path) -> Path:
    (tmp_path / "policy.yaml").write_text(POLICY)
    return tmp_path


def sso(tmp: Path, origins: str = "") -> Any:
    return settings_for(tmp, agent_auth="trusted_header", trusted_proxies="10.1.0.0/24", allowed_origins=origins)


def message(resp: Any, shape: str) -> str:
    body = resp.json()
    return str(body["error"]["message"] if shape == "openai" else body["error"])


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("case", CROSS_SITE)
async def test_a_body_that_is_not_json_is_a_415_before_any_work(tmp: Path, case: str, path: str) -> None:
    request = CROSS_SITE[case]
    async with api(sso(tmp, FRONT_END), [PLANT], client=PROXY) as (http, (backend, box)):
        headers = SSO | {"Origin": FRONT_END} | request.get("headers", {})
        resp = await http.post(path, **{k: v for k, v in request.items() if k != "headers"}, headers=headers)
    assert resp.status_code == 415, resp.text
    assert "application/json" in message(resp, PATHS[path])
    if PATHS[path] == "openai":
        assert resp.json()["error"]["code"] == "unsupported_media_type"
    assert backend.requests == [] and box.calls == []


@pytest.mark.parametrize("case", CROSS_SITE)
async def test_a_foreign_page_is_refused_whatever_it_sends(tmp: Path, case: str) -> None:
    request = CROSS_SITE[case] | {"headers": SSO | {"Origin": PAGE} | CROSS_SITE[case].get("headers", {})}
    async with api(sso(tmp, FRONT_END), [PLANT], client=PROXY) as (http, (backend, box)):
        resp = await http.post("/v1/chat/completions", **request)
        json_too = await http.post("/api/chat", json=ASK, headers=SSO | {"Origin": PAGE})
        gets = await http.get("/v1/models", headers=SSO | {"Origin": PAGE})
    assert resp.status_code == 403 and resp.json()["error"]["code"] == "origin_not_allowed"
    assert json_too.status_code == 403 and "ALLOWED_ORIGINS" in json_too.json()["error"]
    assert gets.status_code == 403
    assert backend.requests == [] and box.calls == []
    refused = [r for r in records(tmp / "audit") if r["event"] == "request"]
    assert [r["status"] for r in refused] == [403, 403, 403] and refused[0]["user"] == "ayse@example.com"


async def test_no_origin_is_allowed_when_allowed_origins_is_empty(tmp: Path) -> None:
    async with api(sso(tmp), client=PROXY) as (http, (backend, _)):
        page = await http.post("/v1/chat/completions", json=ASK, headers=SSO | {"Origin": FRONT_END})
        opaque = await http.post("/v1/chat/completions", json=ASK, headers=SSO | {"Origin": "null"})
        server_side = await http.post("/v1/chat/completions", json=ASK, headers=SSO)  # no Origin: not a browser
    assert (page.status_code, opaque.status_code, server_side.status_code) == (403, 403, 200)
    assert len(backend.requests) == 1


async def test_the_listed_front_end_and_json_bodies_still_work(tmp: Path) -> None:
    typed = {"Content-Type": "application/vnd.api+json; charset=utf-8"}
    async with api(sso(tmp, f"{FRONT_END}, http://localhost:3000"), client=PROXY) as (http, (backend, _)):
        listed = await http.post("/v1/chat/completions", json=ASK, headers=SSO | {"Origin": FRONT_END + "/"})
        plus_json = await http.post("/api/chat", content=BODY, headers=SSO | typed | {"Origin": FRONT_END})
    assert listed.status_code == 200 and plus_json.status_code == 200
    assert len(backend.requests) == 2


async def test_api_keys_get_the_415_too_and_an_empty_post_stays_a_400(tmp: Path) -> None:
    key = add_key(tmp / "keys.yaml", "alice", "guest")
    async with api(settings_for(tmp)) as (http, (backend, _)):
        text = await http.post("/api/chat", content=BODY, headers=bearer(key) | {"Content-Type": "text/plain"})
        empty = await http.post("/v1/chat/completions", headers=bearer(key))
        page = await http.post("/v1/chat/completions", json=ASK, headers=bearer(key) | {"Origin": PAGE})
    assert text.status_code == 415 and "Content-Type text/plain" in text.json()["error"]
    assert empty.status_code == 400 and "empty" in empty.json()["error"]["message"]
    assert page.status_code == 200  # a key is no ambient credential: a foreign page cannot send it
    assert len(backend.requests) == 1
