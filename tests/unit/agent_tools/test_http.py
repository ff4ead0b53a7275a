"""The HTTP edge of the MCP server: bearer-token comparison."""

from __future__ import annotations

import pytest

from agent_tools.http import token_matches


def test_token_compare_is_constant_time_and_strict(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[bytes, bytes]] = []
    import hmac

    real = hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", spy)
    assert token_matches("Bearer abc", "abc") and token_matches("bearer abc", "abc")
    assert not token_matches("Bearer abd", "abc") and not token_matches("Basic abc", "abc")
    assert not token_matches(None, "abc") and not token_matches("abc", "abc")
    assert len(calls) == 3
