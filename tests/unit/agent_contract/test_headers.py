"""The identity headers: what the agent forwards is what the MCP server reads back, for any user name."""

from __future__ import annotations

import pytest

from agent_contract.headers import MAX_ROLE_CHARS, MAX_USER_CHARS, ROLE, USER, Caller


def lowered(headers: dict[str, str]) -> dict[str, str]:
    """How an ASGI server hands headers over: names lower-cased."""
    return {name.lower(): value for name, value in headers.items()}


@pytest.mark.parametrize("user", ["ayşe", "cn=Ops Team,ou=x", "a\nb", "plain"])
def test_the_forwarded_identity_round_trips_and_is_latin1(user: str) -> None:
    sent = Caller(user, "operations").headers()
    for value in sent.values():
        value.encode("latin-1")  # header values must be latin-1
    assert Caller.from_headers(lowered(sent)) == Caller(user, "operations")


def test_no_role_means_no_identity() -> None:
    assert Caller.from_headers({USER.lower(): "someone"}) is None
    assert Caller.from_headers(None) is None


def test_oversized_values_are_cut() -> None:
    caller = Caller.from_headers({USER.lower(): "u" * 500, ROLE.lower(): "r" * 500})
    assert caller is not None and len(caller.user) == MAX_USER_CHARS and len(caller.role) == MAX_ROLE_CHARS
