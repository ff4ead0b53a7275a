"""The request-id rule both services apply: kept when sane, else dropped (server) or replaced (agent)."""

from __future__ import annotations

import pytest

from agent_contract import request_id


@pytest.mark.parametrize("value", ["req-1.a:b_c", "x" * 128, "0f3a"])
def test_sane_ids_are_kept(value: str) -> None:
    assert request_id.clean(value) == value
    assert request_id.clean_or_new(value) == value


@pytest.mark.parametrize("value", ["bad id", "a\nb", "x" * 129, "", None, "ü"])
def test_anything_else_is_dropped_or_replaced(value: str | None) -> None:
    assert request_id.clean(value) is None
    fresh = request_id.clean_or_new(value)
    assert fresh != value and request_id.clean(fresh) == fresh
