"""Day and range arguments as a small model writes them: today/yesterday/bugün/dün or ISO dates."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from mcp.server.mcpserver.exceptions import ToolError

MAX_RANGE_DAYS = 366
_TODAY = {"today", "bugün", "bugun", "now", "şimdi", "simdi"}
_YESTERDAY = {"yesterday", "dün", "dun"}


@dataclass(frozen=True)
class DayRange:
    """Whole days from `start` to `end`, both included."""

    start: dt.date
    end: dt.date

    def bounds(self) -> tuple[str, str]:
        """Half-open timestamp bounds [start 00:00, day after end 00:00) as SQL-comparable text."""
        after = self.end + dt.timedelta(days=1)
        return f"{self.start.isoformat()} 00:00:00", f"{after.isoformat()} 00:00:00"

    def as_dict(self) -> dict[str, str]:
        return {"start_date": self.start.isoformat(), "end_date": self.end.isoformat()}


def parse_day(text: str | None, today: dt.date) -> dt.date:
    """One day: today/yesterday (English or Turkish) or YYYY-MM-DD; anything else is a ToolError."""
    value = (text or "today").strip().lower()
    if value in _TODAY:
        return today
    if value in _YESTERDAY:
        return today - dt.timedelta(days=1)
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        raise ToolError(
            f"could not understand the date {text!r}: use today, yesterday, bugün, dün or YYYY-MM-DD"
        ) from None


def parse_range(start: str | None, end: str | None, today: dt.date) -> DayRange:
    """A range of whole days; `end` defaults to `start`, so one argument means one day."""
    first = parse_day(start, today)
    last = parse_day(end, today) if end and end.strip() else first
    if last < first:
        raise ToolError(f"end_date {last} is before start_date {first}: give the earlier date first")
    if (last - first).days >= MAX_RANGE_DAYS:
        raise ToolError(f"the range {first}..{last} is longer than {MAX_RANGE_DAYS} days: ask for a shorter one")
    return DayRange(first, last)
