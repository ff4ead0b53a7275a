"""Issue 36: a front-end token signed with the real secret and `exp` in 2100 got 200 as its user, any number of
times, although docs/security.md said a token cannot be replayed past 300 s. Now a token is good for
FRONTEND_JWT_MAX_AGE_SECONDS (default 300, Open WebUI's own lifetime) from its `iat`, plus 10 s of clock skew: one
that claims a longer life, or was issued longer ago, is a 401 saying which."""

from __future__ import annotations

import time
from pathlib import Path

from tests.unit.agent.security import test_signed as fixture_module
from tests.unit.agent.security.test_signed import HEADER, chat, token

tmp = fixture_module.tmp  # a folder with the policy those tests use


async def test_a_token_that_never_expires_is_refused(tmp: Path) -> None:
    status, body = await chat(tmp, {HEADER: token(exp=4102444800)})  # 2100-01-01
    assert status == 401 and body["error"]["code"] == "user_token_lifetime_too_long"
    assert "FRONTEND_JWT_MAX_AGE_SECONDS=300" in body["error"]["message"]


async def test_a_token_issued_long_ago_is_refused_even_if_not_expired(tmp: Path) -> None:
    issued = int(time.time()) - 3600
    status, body = await chat(tmp, {HEADER: token(iat=issued, exp=issued + 300 + 3600)})
    assert status == 401 and body["error"]["code"] in ("user_token_lifetime_too_long", "stale_user_token")
    old = int(time.time()) - 400
    status, body = await chat(tmp, {HEADER: token(iat=old, exp=old + 300 + 200)})
    assert status == 401 and body["error"]["code"] == "user_token_lifetime_too_long"


async def test_a_token_as_open_webui_mints_it_still_works_up_to_its_lifetime(tmp: Path) -> None:
    assert (await chat(tmp, {HEADER: token()}))[0] == 200
    issued = int(time.time()) - 200  # late in its 300 s, with room for a slow machine before it expires
    assert (await chat(tmp, {HEADER: token(iat=issued, exp=issued + 300)}))[0] == 200
