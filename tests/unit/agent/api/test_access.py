"""agent.api.access.caller: the loop's caller carries its fair-share key, the rate limit's key (MAX_ROUNDS_PER_USER):
each of a front-end's users apart, no share at all without authentication (everyone would be one user)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest
from starlette.requests import Request

from agent.api.access import caller
from agent.security.auth import Identity


def request_of(identity: Identity) -> Request:
    policy = SimpleNamespace(checker=lambda role: lambda tool: True)
    app = SimpleNamespace(state=SimpleNamespace(security=SimpleNamespace(policy=policy)))
    return cast(Request, SimpleNamespace(state=SimpleNamespace(identity=identity), app=app))


@pytest.mark.parametrize(
    ("identity", "share"),
    [
        (Identity("alice", "support", "api_key", "10.0.0.1"), "alice"),
        (Identity("bob", "support", "frontend", "10.0.0.2", via="open-webui"), "open-webui/bob"),
        (Identity("anonymous", "admin", "none", "10.0.0.3"), ""),
    ],
)
def test_the_callers_share_is_its_rate_limit_key_and_nobody_without_authentication(
    identity: Identity, share: str
) -> None:
    who: Any = caller(request_of(identity))
    assert (who.user, who.share) == (identity.user, share)
