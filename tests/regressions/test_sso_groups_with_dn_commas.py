"""Regression (issue 11, item 7): SSO groups were split on every comma, so the README's own mapping
`"cn=helpdesk,ou=groups": support` never matched a proxy that forwards DNs."""

from __future__ import annotations

import pytest
from starlette.requests import Request

from agent.security.auth import Authenticator
from agent.settings import Settings
from agent_contract.policy import Policy

POLICY = Policy(
    {"admin": frozenset({"*"}), "support": frozenset({"musteri_bakiyesi"}), "guest": frozenset()},
    {"cn=helpdesk,ou=groups": "support", "cn=ops,ou=groups,dc=corp": "admin"},
)


def sso_request(groups: str) -> Request:
    headers = [(b"x-forwarded-user", b"ayse"), (b"x-forwarded-groups", groups.encode())]
    return Request({"type": "http", "method": "POST", "path": "/", "headers": headers, "client": ("127.0.0.1", 1)})


@pytest.mark.parametrize(
    ("header", "role"),
    [
        ("cn=helpdesk,ou=groups", "support"),
        ("cn=staff,ou=groups,cn=helpdesk,ou=groups", "support"),
        ("cn=staff,ou=groups;cn=helpdesk,ou=groups", "support"),
        ("everyone, cn=ops,ou=groups,dc=corp", "admin"),
        ("helpdesk,groups", "guest"),  # plain names are still comma-separated and map to nothing here
    ],
)
def test_a_dn_group_maps_to_its_role(header: str, role: str) -> None:
    settings = Settings(agent_auth="trusted_header", trusted_proxies="127.0.0.1", anonymous_role="guest")
    assert Authenticator(settings, POLICY).authenticate(sso_request(header)).role == role
