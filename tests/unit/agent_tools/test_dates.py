"""Date words, ISO days and ranges as the tools read them."""

from __future__ import annotations

import datetime as dt

import pytest
from mcp.server.mcpserver.exceptions import ToolError

from agent_tools.dates import parse_day, parse_range

DAY = dt.date(2026, 3, 4)


def test_dates() -> None:
    assert parse_day("dün", DAY) == dt.date(2026, 3, 3)
    assert parse_day(" BUGÜN ", DAY) == DAY
    assert parse_day(None, DAY) == DAY
    days = parse_range("2026-03-01", "2026-03-04", DAY)
    assert days.bounds() == ("2026-03-01 00:00:00", "2026-03-05 00:00:00")
    with pytest.raises(ToolError):
        parse_day("03/04/2026", DAY)
