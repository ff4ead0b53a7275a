"""Expected-argument matchers: how a question states which argument values count as right.

A spec is one of:
- a scalar (`EURUSD`, `5`): equal; strings compare case-insensitively with surrounding spaces ignored;
- `null`: the argument is left out (an empty string counts as left out: the tools treat both as the default);
- a list: any one of the alternatives (`[XAUUSD, gold, altın]`, `[{date: today}, null]`);
- `{contains: text}`: a string containing `text` (case-insensitive);
- `{regex: pattern}`: a string matching `pattern` (Python `re.search`, case-insensitive);
- `{date: today|yesterday|YYYY-MM-DD}`: that day as a word (today/bugün, yesterday/dün) or as YYYY-MM-DD,
  relative to the run's date.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

DATE_WORDS: dict[str, frozenset[str]] = {
    "today": frozenset({"today", "bugün", "bugun"}),
    "yesterday": frozenset({"yesterday", "dün", "dun"}),
}
MATCHER_KEYS = ("contains", "regex", "date")


def spec_problem(spec: Any) -> str | None:
    """Why `spec` is not a valid matcher, or None if it is (checked when the question set loads)."""
    if spec is None or isinstance(spec, str | int | float | bool):
        return None
    if isinstance(spec, list):
        if not spec:
            return "an empty list of alternatives matches nothing"
        return next((p for p in map(spec_problem, spec) if p), None)
    if not isinstance(spec, dict) or len(spec) != 1 or next(iter(spec)) not in MATCHER_KEYS:
        return f"expected a value, a list, or one of {{{', '.join(MATCHER_KEYS)}: ...}}, got {spec!r}"
    key, value = next(iter(spec.items()))
    if not isinstance(value, str):
        return f"{key}: needs a string, got {value!r}"
    if key == "regex":
        try:
            re.compile(value)
        except re.error as exc:
            return f"regex {value!r} does not compile: {exc}"
    if key == "date" and value not in DATE_WORDS:
        try:
            dt.date.fromisoformat(value)
        except ValueError:
            return f"date: use today, yesterday or YYYY-MM-DD, got {value!r}"
    return None


def _absent(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def _date_ok(wanted: str, actual: str, today: dt.date) -> bool:
    text = actual.strip().casefold()
    if wanted in DATE_WORDS:
        offset = 0 if wanted == "today" else 1
        return text in DATE_WORDS[wanted] or text == (today - dt.timedelta(days=offset)).isoformat()
    return text == wanted


def matches(spec: Any, value: Any, today: dt.date) -> bool:
    """Whether an argument value (None when the model left it out) satisfies `spec`."""
    if isinstance(spec, list):
        return any(matches(alternative, value, today) for alternative in spec)
    if spec is None:
        return _absent(value)
    if _absent(value):
        return False
    if isinstance(spec, dict):
        key, wanted = next(iter(spec.items()))
        text = str(value)
        if key == "contains":
            return str(wanted).casefold() in text.casefold()
        if key == "regex":
            return re.search(str(wanted), text, re.IGNORECASE) is not None
        return _date_ok(str(wanted), text, today)
    if isinstance(spec, str) or isinstance(value, str):
        return str(spec).strip().casefold() == str(value).strip().casefold()
    return bool(spec == value)


def describe(spec: Any) -> str:
    """A short human form of a spec for reports: `EURUSD`, `today|dün`, `contains 'milk'`."""
    if isinstance(spec, list):
        return " | ".join(describe(s) for s in spec)
    if spec is None:
        return "(left out)"
    if isinstance(spec, dict):
        key, wanted = next(iter(spec.items()))
        return f"{key} {wanted!r}"
    return str(spec)
