"""Identity and roles in the API (in-process): keys, SSO headers, 401s, and the tool list built per role."""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import REGISTRY

from agent.api.app import create_app
from agent.security.audit_check import records
from agent.security.auth import Authenticator, KeyStore, add_key, key_hash, read_keys, revoke_key
from agent.settings import Settings
from agent_contract.policy import load_policy
from tests.unit.agent.conftest import MemoryToolBox, ScriptedBackend

POLICY = """roles:
  admin: ["*"]
  desk: [pozisyon_dagilimi, islem_hacmi]
  clock: [sistem_bilgisi]
  guest: []
groups:
  cn=traders: desk
"""
ASK = {"model": "qwen3:4b", "messages": [{"role": "user", "content": "EURUSD positions?"}]}


@pytest.fixture
def env(tmp_path: Path) -> dict[str, Any]:
    (tmp_path / "policy.yaml").write_text(POLICY)
    keys = {role: add_key(tmp_path / "keys.yaml", f"{role}-user", role) for role in ("admin", "desk", "clock", "guest")}
    return {"tmp": tmp_path, "keys": keys}


def settings_for(tmp: Path, **extra: Any) -> Settings:
    base: dict[str, Any] = {
        "model_backend": "direct",
        "agent_keys_file": tmp / "keys.yaml",
        "agent_policy_file": tmp / "policy.yaml",
        "audit_dir": tmp / "audit",
        "audit_key": "unit-test-audit-key-0123456789",
        "rate_limit_per_minute": 0,
    }
    return Settings(**(base | extra))


@asynccontextmanager
async def api(
    settings: Settings, replies: list[Any] | None = None, client: tuple[str, int] = ("127.0.0.1", 5000)
) -> AsyncIterator[tuple[httpx.AsyncClient, Any]]:
    backend, box = ScriptedBackend(replies or []), MemoryToolBox()
    app = create_app(settings, backend=backend, toolbox=box)  # type: ignore[arg-type]
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, client=client)
        async with httpx.AsyncClient(transport=transport, base_url="http://agent") as http:
            yield http, (backend, box)


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def test_keys_are_stored_only_as_hashes_and_revocation_applies_at_once(tmp_path: Path) -> None:
    path = tmp_path / "keys.yaml"
    key = add_key(path, "alice", "desk")
    assert key not in path.read_text() and key_hash(key) in path.read_text()
    store = KeyStore(path)
    entry = store.lookup(key)
    assert entry is not None and (entry.name, entry.role) == ("alice", "desk")
    assert store.lookup(key + "x") is None
    assert revoke_key(path, "alice") and store.lookup(key) is None
    with pytest.raises(ValueError, match="already exists"):
        add_key(path, "bob", "desk") and add_key(path, "bob", "desk")
    assert [e.name for e in read_keys(path)] == ["bob"]


@pytest.mark.parametrize(
    "headers, code",
    [
        ({}, "missing_api_key"),
        (bearer("la-wrong"), "invalid_api_key"),
        ({"Authorization": "Basic abc"}, "missing_api_key"),
    ],
)
async def test_missing_or_wrong_key_is_a_401_in_the_openai_shape(
    env: dict[str, Any], headers: dict[str, str], code: str
) -> None:
    settings = settings_for(env["tmp"])
    async with api(settings) as (http, (backend, _)):
        resp = await http.post("/v1/chat/completions", json=ASK, headers=headers)
        models = await http.get("/v1/models", headers=headers)
        health = await http.get("/healthz")
    assert resp.status_code == 401 and models.status_code == 401 and health.status_code == 200
    assert resp.json() == {
        "error": {
            "message": resp.json()["error"]["message"],
            "type": "authentication_error",
            "param": None,
            "code": code,
        }
    }
    assert backend.requests == []  # the model never ran
    failures = [r for r in records(settings.audit_dir) if r["status"] == 401]
    assert len(failures) == 2 and all(r["user"] is None and r["error"] == code for r in failures)
    text = (settings.audit_dir / "audit.jsonl").read_text()
    assert "la-wrong" not in text and "EURUSD" not in text  # the fact only: no key, no question


@pytest.mark.parametrize(
    "role, offered",
    [
        ("admin", ["pozisyon_dagilimi", "islem_hacmi", "sistem_bilgisi"]),
        ("desk", ["pozisyon_dagilimi", "islem_hacmi"]),
        ("clock", ["sistem_bilgisi"]),
        ("guest", []),
    ],
)
async def test_the_model_is_offered_exactly_the_roles_tools(env: dict[str, Any], role: str, offered: list[str]) -> None:
    async with api(settings_for(env["tmp"])) as (http, (backend, _)):
        resp = await http.post("/v1/chat/completions", json=ASK, headers=bearer(env["keys"][role]))
    assert resp.status_code == 200
    tools = backend.requests[0].tools or []
    assert [t["function"]["name"] for t in tools] == offered


async def test_a_forbidden_call_is_refused_audited_and_never_run(env: dict[str, Any]) -> None:
    settings = settings_for(env["tmp"])
    replies = [[("sistem_bilgisi", {}), ("islem_hacmi", {"symbol": "EURUSD"})], "done"]
    async with api(settings, replies) as (http, (_, box)):
        resp = await http.post("/v1/chat/completions", json=ASK, headers=bearer(env["keys"]["desk"]))
    trace = resp.json()["local_agent"]["tool_calls"]
    assert [(t["name"], t["outcome"]) for t in trace] == [("sistem_bilgisi", "forbidden"), ("islem_hacmi", "ok")]
    assert box.calls == [("islem_hacmi", {"symbol": "EURUSD"})]
    (record,) = [r for r in records(settings.audit_dir) if r["event"] == "request"]
    assert record["user"] == "desk-user" and record["role"] == "desk" and record["status"] == 200
    calls = record["tool_calls"]
    assert calls[0]["outcome"] == "forbidden" and calls[0]["result_sha256"] is None
    assert calls[1]["result_sha256"] and calls[1]["result_chars"] > 0
    assert record["question"] == "EURUSD positions?" and len(record["answer_sha256"]) == 64


async def test_a_client_cannot_choose_its_role_with_headers(env: dict[str, Any]) -> None:
    forged = bearer(env["keys"]["guest"]) | {
        "X-Agent-Role": "admin",
        "X-Agent-User": "root",
        "X-Forwarded-Groups": "admin",
        "X-Forwarded-User": "root",
    }
    async with api(settings_for(env["tmp"])) as (http, (backend, _)):
        await http.post("/v1/chat/completions", json=ASK, headers=forged)
    assert backend.requests[0].tools is None  # guest: no tools at all


async def test_sso_headers_are_trusted_only_from_the_proxy(env: dict[str, Any]) -> None:
    settings = settings_for(env["tmp"], agent_auth="trusted_header", trusted_proxies="10.1.0.0/24")
    sso = {
        b"X-Forwarded-User": "ayşe.kaya".encode(),
        b"X-Forwarded-Groups": b"cn=traders, staff",
        b"X-Forwarded-For": b"10.9.8.7",
    }
    async with api(settings, client=("10.1.0.3", 4000)) as (http, (backend, _)):
        ok = await http.post("/v1/chat/completions", json=ASK, headers=sso)
        nobody = await http.post("/v1/chat/completions", json=ASK, headers={"X-Forwarded-Groups": "admin"})
        unknown = await http.post("/v1/chat/completions", json=ASK, headers={"X-Forwarded-User": "temp"})
    async with api(settings, client=("10.2.0.3", 4000)) as (http, _):
        outside = await http.post("/v1/chat/completions", json=ASK, headers=sso)
    assert ok.status_code == 200 and nobody.status_code == 401 and outside.status_code == 401
    assert outside.json()["error"]["code"] == "untrusted_proxy"
    assert [t["function"]["name"] for t in backend.requests[0].tools or []] == ["pozisyon_dagilimi", "islem_hacmi"]
    assert unknown.status_code == 200 and backend.requests[1].tools is None  # no known group: ANONYMOUS_ROLE
    first = next(r for r in records(settings.audit_dir) if r["status"] == 200)
    assert (first["user"], first["role"], first["client"], first["auth"]) == (
        "ayşe.kaya",
        "desk",
        "10.9.8.7",
        "trusted_header",
    )


async def test_auth_none_gives_everyone_the_anonymous_role(env: dict[str, Any]) -> None:
    settings = settings_for(env["tmp"], agent_auth="none", anonymous_role="clock")
    async with api(settings) as (http, (backend, _)):
        resp = await http.post("/api/chat", json=ASK | {"stream": False})
    assert resp.status_code == 200
    assert [t["function"]["name"] for t in backend.requests[0].tools or []] == ["sistem_bilgisi"]


def test_the_defaults_are_the_safe_ones() -> None:
    settings = Settings()
    assert settings.agent_auth == "api_key" and settings.anonymous_role == "guest"
    assert settings.audit_pseudonymize and settings.rate_limit_per_minute > 0


async def test_the_ollama_endpoint_answers_401_in_its_own_shape(env: dict[str, Any]) -> None:
    async with api(settings_for(env["tmp"])) as (http, _):
        resp = await http.post("/api/chat", json=ASK)
    assert resp.status_code == 401 and set(json.loads(resp.text)) == {"error"}


async def test_a_failing_audit_log_is_counted_and_logged_loudly(env: dict[str, Any]) -> None:
    settings = settings_for(env["tmp"])
    async with api(settings) as (http, _):
        before = REGISTRY.get_sample_value("agent_audit_write_failures_total") or 0.0
        (settings.audit_dir / "audit.jsonl").unlink(missing_ok=True)
        (settings.audit_dir / "audit.jsonl").mkdir(parents=True)  # the log cannot be appended to any more
        resp = await http.post("/v1/chat/completions", json=ASK, headers=bearer(env["keys"]["desk"]))
        assert resp.status_code == 200
        assert REGISTRY.get_sample_value("agent_audit_write_failures_total") == before + 1


def test_startup_warns_about_configurations_that_refuse_everyone(tmp_path: Path) -> None:
    empty = Authenticator(Settings(agent_keys_file=tmp_path / "none.yaml"), load_policy())
    assert "holds no keys" in empty.startup_warnings()[0]
    no_proxy = Authenticator(Settings(agent_auth="trusted_header"), load_policy())
    assert "TRUSTED_PROXIES is empty" in no_proxy.startup_warnings()[0]


async def test_a_timed_out_call_is_audited_as_executed_with_its_result(env: dict[str, Any]) -> None:
    settings = settings_for(env["tmp"])
    replies = [[("islem_hacmi", {"symbol": "EURUSD"})], "done"]
    backend, box = ScriptedBackend(replies), MemoryToolBox(slow={"islem_hacmi"})
    app = create_app(settings, backend=backend, toolbox=box)  # type: ignore[arg-type]
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 5000))
        async with httpx.AsyncClient(transport=transport, base_url="http://agent") as http:
            resp = await http.post("/v1/chat/completions", json=ASK, headers=bearer(env["keys"]["desk"]))
    assert resp.status_code == 200
    (record,) = [r for r in records(settings.audit_dir) if r["event"] == "request"]
    (call,) = record["tool_calls"]
    assert call["outcome"] == "timeout" and call["result_chars"] == len("islem_hacmi took too long.")
    assert call["result_sha256"] == hashlib.sha256(b"islem_hacmi took too long.").hexdigest()
