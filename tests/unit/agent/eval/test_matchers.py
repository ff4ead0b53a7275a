"""Expected-argument matchers: values, alternatives, omission, contains, regex and relative dates."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from agent.eval.matchers import describe, matches, spec_problem

TODAY = dt.date(2026, 3, 10)


@pytest.mark.parametrize(
    ("spec", "value", "ok"),
    [
        ("EURUSD", "eurusd ", True),
        ("EURUSD", "GBPUSD", False),
        (5, 5, True),
        (5, "5", True),
        (5, 6, False),
        (True, True, True),
        (["XAUUSD", "gold"], "Gold", True),
        (["XAUUSD", "gold"], "silver", False),
        (None, None, True),
        (None, "", True),
        (None, "today", False),
        ("today", None, False),
        ([{"date": "today"}, None], None, True),
        ({"contains": "milk"}, "Buy MILK tomorrow", True),
        ({"contains": "milk"}, "buy bread", False),
        ({"regex": r"^C-?1001$"}, "c1001", True),
        ({"regex": r"^C-?1001$"}, "C10011", False),
        ({"date": "today"}, "bugün", True),
        ({"date": "today"}, "2026-03-10", True),
        ({"date": "today"}, "2026-03-09", False),
        ({"date": "yesterday"}, "Dün", True),
        ({"date": "yesterday"}, "2026-03-09", True),
        ({"date": "yesterday"}, "today", False),
        ({"date": "2026-01-02"}, "2026-01-02", True),
    ],
)
def test_matches(spec: Any, value: Any, ok: bool) -> None:
    assert matches(spec, value, TODAY) is ok


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ([], "empty list"),
        ({"contains": "a", "regex": "b"}, "expected a value"),
        ({"startswith": "a"}, "expected a value"),
        ({"regex": "("}, "does not compile"),
        ({"date": "tomorrow"}, "use today, yesterday"),
        ({"contains": 3}, "needs a string"),
        ([1, {"bad": 1}], "expected a value"),
    ],
)
def test_spec_problems_are_named(spec: Any, problem: str) -> None:
    assert problem in (spec_problem(spec) or "")


def test_valid_specs_have_no_problem_and_a_short_description() -> None:
    spec = [{"date": "today"}, None, "x"]
    assert spec_problem(spec) is None
    assert describe(spec) == "date 'today' | (left out) | x"
