"""Issue 36: behind a proxy that appends rather than replaces, a client's `X-Forwarded-Groups: admin` sent before
the proxy's `support` gave admin. An identity header (the SSO user and groups, a front-end's user headers and its
signed token) that comes more than once is now a 401 naming it; docs/security.md says the proxy must replace."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.security.auth import add_key
from tests.regressions import test_look_alike_identities as fixture_module
from tests.regressions.test_look_alike_identities import JWT, SECRET, token
from tests.unit.agent.security.test_auth import ASK, api, bearer, settings_for

tmp = fixture_module.tmp  # a folder with the policy those tests use


@pytest.mark.parametrize(
    "headers",
    [
        [(b"X-Forwarded-User", b"ayse"), (b"X-Forwarded-Groups", b"admin"), (b"X-Forwarded-Groups", b"cn=traders")],
        [(b"X-Forwarded-User", b"boss@example.com"), (b"X-Forwarded-User", b"ayse"), (b"X-Forwarded-Groups", b"x")],
    ],
    ids=["groups twice", "user twice"],
)
async def test_an_sso_identity_header_sent_twice_is_refused(tmp: Path, headers: list[tuple[bytes, bytes]]) -> None:
    settings = settings_for(tmp, agent_auth="trusted_header", trusted_proxies="10.1.0.0/24")
    async with api(settings, client=("10.1.0.3", 4000)) as (http, (backend, _)):
        resp = await http.post("/v1/chat/completions", json=ASK, headers=headers)
    error = resp.json()["error"]
    assert resp.status_code == 401 and error["code"] == "repeated_identity_header"
    assert headers[-1][0].decode() in error["message"] or headers[0][0].decode() in error["message"]
    assert backend.requests == []


async def test_the_same_headers_once_still_work(tmp: Path) -> None:
    settings = settings_for(tmp, agent_auth="trusted_header", trusted_proxies="10.1.0.0/24")
    async with api(settings, client=("10.1.0.3", 4000)) as (http, _):
        resp = await http.post(
            "/v1/chat/completions", json=ASK, headers={"X-Forwarded-User": "ayse", "X-Forwarded-Groups": "cn=traders"}
        )
    assert resp.status_code == 200


async def test_a_front_end_token_sent_twice_is_refused(tmp: Path) -> None:
    key = add_key(tmp / "keys.yaml", "openwebui", "guest", frontend=True)
    async with api(settings_for(tmp, frontend_jwt_secret=SECRET)) as (http, (backend, _)):
        headers = [*bearer(key).items(), (JWT, token("ayse@example.com")), (JWT, token("boss@example.com"))]
        resp = await http.post("/v1/chat/completions", json=ASK, headers=headers)
    assert resp.status_code == 401 and resp.json()["error"]["code"] == "repeated_identity_header"
    assert backend.requests == []
