"""Regression (issue 26, finding 1): an invisible character never turns one user name into another.

Replays the attack on every way a user name reaches the agent: a front-end's plain user header, the SSO
proxy's user header (trusted_header) and the e-mail inside a validly signed front-end token. Each is refused
with a 401 that names the character, audited with the name as received (escaped), and never gets the role of
the user it looks like.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import jwt
import pytest

from agent.security.audit_check import records
from agent.security.auth import add_key
from agent.security.names import RefusedName, checked, escaped, from_header
from agent_contract.policy import parse_policy
from tests.unit.agent.security.test_auth import ASK, api, bearer, settings_for

POLICY = """roles:
  admin: ["*"]
  desk: [pozisyon_dagilimi, islem_hacmi]
  guest: []
groups:
  cn=traders: desk
users:
  boss@example.com: admin
"""
SECRET = "unit-test-frontend-jwt-secret-0123456789abcdef"
BOSS = "boss@example.com"
JWT = "X-OpenWebUI-User-Jwt"
LOOK_ALIKES = {
    "zero-width space": "bo\u200bss@example.com",
    "soft hyphen": "bo\u00adss@example.com",
    "right-to-left override": "\u202emoc.elpmaxe@ssob",
}


@pytest.fixture
def tmp(tmp_path: Path) -> Path:
    (tmp_path / "policy.yaml").write_text(POLICY)
    return tmp_path


def token(email: str, secret: str = SECRET, **claims: Any) -> str:
    now = int(time.time())
    body = {"sub": "id-1", "email": email, "name": "x", "role": "admin", "iss": "open-webui", "iat": now}
    return jwt.encode(body | {"exp": now + 300} | claims, secret, algorithm="HS256")


def audited_refusal(tmp: Path) -> dict[str, Any]:
    (record,) = [r for r in records(tmp / "audit") if r["event"] == "request"]
    assert record["status"] == 401 and record["user"] is None and record["role"] is None
    return record


@pytest.mark.parametrize("name", LOOK_ALIKES.values(), ids=LOOK_ALIKES.keys())
async def test_a_front_end_user_header_with_an_invisible_character_is_refused(tmp: Path, name: str) -> None:
    key = add_key(tmp / "keys.yaml", "openwebui", "guest", frontend=True)
    async with api(settings_for(tmp)) as (http, (backend, _)):
        raw = {b"Authorization": f"Bearer {key}".encode(), b"X-OpenWebUI-User-Email": name.encode()}
        resp = await http.post("/v1/chat/completions", json=ASK, headers=raw)
    assert resp.status_code == 401 and resp.json()["error"]["code"] == "invalid_user_name"
    assert "X-OpenWebUI-User-Email" in resp.json()["error"]["message"] and "U+" in resp.json()["error"]["message"]
    assert backend.requests == []  # the model never ran, as boss or as anyone
    assert audited_refusal(tmp)["claimed_user"] == escaped(name) and "\\u" in escaped(name)


@pytest.mark.parametrize("name", LOOK_ALIKES.values(), ids=LOOK_ALIKES.keys())
async def test_an_sso_user_with_an_invisible_character_is_refused(tmp: Path, name: str) -> None:
    settings = settings_for(tmp, agent_auth="trusted_header", trusted_proxies="10.1.0.0/24")
    sso = {b"X-Forwarded-User": name.encode(), b"X-Forwarded-Groups": b"cn=traders"}
    async with api(settings, client=("10.1.0.3", 4000)) as (http, (backend, _)):
        resp = await http.post("/v1/chat/completions", json=ASK, headers=sso)
    assert resp.status_code == 401 and resp.json()["error"]["code"] == "invalid_user_name"
    assert backend.requests == []
    assert audited_refusal(tmp)["claimed_user"] == escaped(name)


@pytest.mark.parametrize("name", LOOK_ALIKES.values(), ids=LOOK_ALIKES.keys())
async def test_a_look_alike_email_inside_a_valid_token_gets_no_ones_role(tmp: Path, name: str) -> None:
    key = add_key(tmp / "keys.yaml", "openwebui", "guest", frontend=True)
    async with api(settings_for(tmp, frontend_jwt_secret=SECRET)) as (http, (backend, _)):
        resp, real = [
            await http.post("/v1/chat/completions", json=ASK, headers=bearer(key) | {JWT: token(who)})
            for who in (name, BOSS)
        ]
    assert resp.status_code == 401 and resp.json()["error"]["code"] == "invalid_user_name"
    assert real.status_code == 200 and len(backend.requests) == 1  # only the real boss reached the model
    refused, served = [r for r in records(tmp / "audit") if r["event"] == "request"]
    assert (refused["status"], refused["role"], refused["claimed_user"]) == (401, None, escaped(name))
    assert (served["user"], served["role"], served["auth"]) == (BOSS, "admin", "frontend")


def test_names_are_compared_exactly_and_emails_ascii_case_insensitively() -> None:
    policy = parse_policy(
        {"roles": {"admin": ["*"], "guest": []}, "users": {"katie@example.com": "admin", "*@ops.example.com": "admin"}},
        "test",
    )
    assert policy.role_for_user("Katie@Example.COM") == "admin"  # ASCII case: the same mailbox
    assert policy.role_for_user("\u212aatie@example.com") is None  # KELVIN SIGN lowers to "k" in Unicode
    assert policy.role_for_user("katie@example.com\u0307") is None  # a combining mark: another name
    assert policy.role_for_user("katıe@example.com") is None  # dotless i stays dotless


def test_names_are_taken_as_received_or_refused_never_cleaned() -> None:
    assert from_header("ayşe.kaya".encode().decode("latin-1"), "h") == "ayşe.kaya"
    assert checked("Ayşe Kaya", "h") == "Ayşe Kaya"  # a space, a letter beyond ASCII: a name
    with pytest.raises(RefusedName, match="not UTF-8"):
        from_header(b"b\xf6ss@example.com".decode("latin-1"), "h")  # latin-1 bytes would alias "böss"
    with pytest.raises(RefusedName, match="longer than"):
        checked("a" * 201, "h")  # cutting it could make two names one
    for bad in ("bo\x00ss", "bo\u2028ss", "bo\ue000ss", "bo\u2066ss", "bo\ufeffss"):
        with pytest.raises(RefusedName, match="U\\+"):
            checked(bad, "h")
    assert escaped("bo\u200bss\\x") == "bo\\u200bss\\\\x"
