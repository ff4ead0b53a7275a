"""Signed front-end identity: with FRONTEND_JWT_SECRET set, a front-end key's user comes only from a valid token.

The tokens are made the way Open WebUI 0.12.4 makes them (open_webui/utils/headers.py, _mint_forward_user_jwt:
HS256, claims sub, email, name, role, iss "open-webui", iat, exp) and sent in its header, X-OpenWebUI-User-Jwt.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jwt
import pytest
from pydantic import SecretStr

from agent.security.audit_check import records
from agent.security.auth import add_key, read_keys
from agent.security.signed import SignedUsers
from agent.settings import Settings
from tests.unit.agent.security.test_auth import ASK, api, bearer, settings_for

SECRET = "unit-test-frontend-jwt-secret-0123456789abcdef"
HEADER = "X-OpenWebUI-User-Jwt"
POLICY = """roles:
  admin: ["*"]
  desk: [pozisyon_dagilimi, islem_hacmi]
  guest: []
users:
  ayse@example.com: desk
"""


@pytest.fixture
def tmp(tmp_path: Path) -> Path:
    (tmp_path / "policy.yaml").write_text(POLICY)
    return tmp_path


def token(email: str = "ayse@example.com", secret: str = SECRET, **claims: Any) -> str:
    """What Open WebUI sends: its claims, signed with the shared secret."""
    now = int(time.time())
    body = {"sub": "u-1", "email": email, "name": "Ayşe", "role": "user", "iss": "open-webui", "iat": now}
    return jwt.encode(body | {"exp": now + 300} | claims, secret, algorithm="HS256")


def unsigned(email: str) -> str:
    """alg "none": a token anyone can write."""
    part = [base64.urlsafe_b64encode(json.dumps(p).encode()).rstrip(b"=").decode() for p in ({"alg": "none"}, {})]
    now = int(time.time())
    claims = {"email": email, "iss": "open-webui", "iat": now, "exp": now + 300}
    part[1] = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    return f"{part[0]}.{part[1]}."


async def chat(tmp: Path, headers: dict[str, str], settings: Settings | None = None) -> tuple[int, dict[str, Any]]:
    key = add_key(tmp / "keys.yaml", f"front{len(read_keys(tmp / 'keys.yaml'))}", "guest", frontend=True)
    async with api(settings or settings_for(tmp, frontend_jwt_secret=SECRET)) as (http, _):
        resp = await http.post("/v1/chat/completions", json=ASK, headers=bearer(key) | headers)
    return resp.status_code, resp.json()


async def test_a_valid_token_names_the_user_who_gets_the_policy_role_not_the_tokens(tmp: Path) -> None:
    status, _ = await chat(tmp, {HEADER: token(role="admin")})
    assert status == 200
    (record,) = [r for r in records(tmp / "audit") if r["event"] == "request"]
    assert (record["user"], record["role"], record["auth"]) == ("ayse@example.com", "desk", "frontend")


@pytest.mark.parametrize(
    "bad, code",
    [  # made as the test runs: a token made at collection expires before a late test on a busy machine
        (lambda: token(secret="another-secret-that-is-long-enough-0123456789"), "bad_user_token_signature"),
        (lambda: token(exp=int(time.time()) - 60, iat=int(time.time()) - 400), "expired_user_token"),
        (lambda: token(iss="evil-webui"), "wrong_user_token_issuer"),
        (lambda: unsigned("ayse@example.com"), "invalid_user_token"),
        (lambda: token(email="", sub=""), "invalid_user_token"),
        (lambda: "not-a-token", "invalid_user_token"),
    ],
    ids=["wrong key", "expired", "wrong issuer", "alg none", "no user", "garbage"],
)
async def test_a_bad_token_is_a_401_naming_the_problem(tmp: Path, bad: Callable[[], str], code: str) -> None:
    status, body = await chat(tmp, {HEADER: bad()})
    assert status == 401 and body["error"]["code"] == code and HEADER in body["error"]["message"]
    (record,) = [r for r in records(tmp / "audit") if r["event"] == "request"]
    assert record["status"] == 401 and record["user"] is None and record["error"] == code


async def test_without_a_token_plain_user_headers_are_ignored_and_a_chat_refused(tmp: Path) -> None:
    key = add_key(tmp / "keys.yaml", "openwebui", "guest", frontend=True)
    plain = {"X-OpenWebUI-User-Email": "ayse@example.com", "X-OpenWebUI-User-Role": "admin"}
    async with api(settings_for(tmp, frontend_jwt_secret=SECRET)) as (http, (backend, _)):
        refused = await http.post("/v1/chat/completions", json=ASK, headers=bearer(key) | plain)
        listing = await http.get("/api/tags", headers=bearer(key) | plain)
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "missing_user_token"
    assert backend.requests == []
    assert listing.status_code == 200  # a model listing without a user is the front-end itself, never ayse
    # With both a token and plain headers, only the token counts.
    status, _ = await chat(tmp, {HEADER: token("mehmet@example.com"), "X-OpenWebUI-User-Email": "ayse@example.com"})
    served = [r for r in records(tmp / "audit") if r["status"] == 200 and r["endpoint"] == "/v1/chat/completions"]
    assert status == 200 and (served[-1]["user"], served[-1]["role"]) == ("mehmet@example.com", "guest")


async def test_without_the_secret_the_plain_headers_still_name_the_user(tmp: Path) -> None:
    status, _ = await chat(tmp, {"X-OpenWebUI-User-Email": "ayse@example.com"}, settings_for(tmp))
    (record,) = [r for r in records(tmp / "audit") if r["event"] == "request"]
    assert status == 200 and (record["user"], record["role"]) == ("ayse@example.com", "desk")


async def test_a_rotated_secret_file_applies_without_a_restart(tmp: Path) -> None:
    secret_file = tmp / "jwt_secret"
    secret_file.write_text(SECRET + "\n")
    key = add_key(tmp / "keys.yaml", "openwebui", "guest", frontend=True)
    rotated = "the-rotated-frontend-jwt-secret-0123456789abcdef"
    async with api(settings_for(tmp, frontend_jwt_secret_file=secret_file)) as (http, _):
        before = await http.post("/v1/chat/completions", json=ASK, headers=bearer(key) | {HEADER: token()})
        secret_file.write_text(rotated + "\n")
        old = await http.post("/v1/chat/completions", json=ASK, headers=bearer(key) | {HEADER: token()})
        new = await http.post("/v1/chat/completions", json=ASK, headers=bearer(key) | {HEADER: token(secret=rotated)})
    assert (before.status_code, old.status_code, new.status_code) == (200, 401, 200)


def test_a_short_secret_is_refused_at_start() -> None:
    with pytest.raises(ValueError, match="at least 32"):
        SignedUsers(Settings(frontend_jwt_secret=SecretStr("short")))
