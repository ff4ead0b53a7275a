"""Issue 36: U+3164 (Hangul filler), U+034F, U+FE0F, U+2800, NBSP, a trailing space and Cyrillic letters were accepted
in user names from signed tokens and SSO headers: no role gained, but audit lines read `boss` for someone else.
Each is now the same clear 401 as a format character, on both ways in; a policy naming such a user or group is
refused at load, and real names (Turkish letters, a Cyrillic name alone, an inner space) still pass."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.security.auth import add_key
from agent.security.names import RefusedName, checked
from agent_contract.policy import PolicyError, parse_policy
from tests.regressions import test_look_alike_identities as fixture_module
from tests.regressions.test_look_alike_identities import JWT, SECRET, audited_refusal, token
from tests.unit.agent.security.test_auth import ASK, api, bearer, settings_for

READ_AS_BOSS = {
    "hangul filler": "boss\u3164@example.com",
    "combining grapheme joiner": "bo\u034fss@example.com",
    "variation selector 16": "boss\ufe0f@example.com",
    "braille blank": "boss@example.com\u2800",
    "no-break space": "boss\u00a0@example.com",
    "trailing space": "boss@example.com ",
    "leading space": " boss@example.com",
    "cyrillic o": "b\u043ess@example.com",
    "greek omicron": "b\u03bfss@example.com",
}


tmp = fixture_module.tmp  # a folder with the policy those tests use


@pytest.mark.parametrize("name", READ_AS_BOSS.values(), ids=READ_AS_BOSS.keys())
async def test_a_signed_token_naming_a_look_alike_is_refused(tmp: Path, name: str) -> None:
    key = add_key(tmp / "keys.yaml", "openwebui", "guest", frontend=True)
    async with api(settings_for(tmp, frontend_jwt_secret=SECRET)) as (http, (backend, _)):
        resp = await http.post("/v1/chat/completions", json=ASK, headers=bearer(key) | {JWT: token(name)})
    assert resp.status_code == 401 and resp.json()["error"]["code"] == "invalid_user_name"
    assert backend.requests == []
    assert audited_refusal(tmp)["claimed_user"] != "boss@example.com"


@pytest.mark.parametrize("name", READ_AS_BOSS.values(), ids=READ_AS_BOSS.keys())
async def test_an_sso_header_naming_a_look_alike_is_refused(tmp: Path, name: str) -> None:
    settings = settings_for(tmp, agent_auth="trusted_header", trusted_proxies="10.1.0.0/24")
    sso = {b"X-Forwarded-User": name.encode(), b"X-Forwarded-Groups": b"cn=traders"}
    async with api(settings, client=("10.1.0.3", 4000)) as (http, (backend, _)):
        resp = await http.post("/v1/chat/completions", json=ASK, headers=sso)
    assert resp.status_code == 401 and resp.json()["error"]["code"] == "invalid_user_name"
    assert backend.requests == []


@pytest.mark.parametrize("name", READ_AS_BOSS.values(), ids=READ_AS_BOSS.keys())
def test_a_policy_entry_that_could_stand_for_another_name_is_refused(name: str) -> None:
    with pytest.raises(PolicyError, match="could stand for another name"):
        parse_policy({"roles": {"admin": ["*"]}, "users": {name: "admin"}}, "test")
    with pytest.raises(PolicyError, match="could stand for another name"):
        parse_policy({"roles": {"admin": ["*"]}, "groups": {name: "admin"}}, "test")


def test_real_names_still_pass() -> None:
    for name in ("ayşe.kaya@example.com", "Ayşe Kaya", "борис", "Σοφία", "ığüşöç@örnek.com.tr"):
        assert checked(name, "h") == name
    with pytest.raises(RefusedName, match="mixes Latin and Cyrillic"):
        checked("b\u043ess", "h")
