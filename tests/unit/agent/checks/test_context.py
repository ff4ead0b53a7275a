"""The client's texts are scanned once each, and only when a figure of the answer is not in the tool results."""

from __future__ import annotations

import json

import pytest

from agent.checks import context, figures
from agent.checks.figures import Figure
from agent.checks.grounding import check

TOOLS = [("depozit_ozeti", json.dumps({"count": 42, "total_usd": 12345.67, "day": "2026-12-03"}))]


@pytest.fixture
def scanned(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every text the context index scans, in order (the cache starts empty)."""
    seen: list[str] = []
    real = figures.scan

    def counting(text: str) -> list[Figure]:
        seen.append(text)
        return real(text)

    monkeypatch.setattr(context, "scan", counting)
    monkeypatch.setattr(context, "INDEX", context.TextIndex())
    return seen


def history(n: int, tag: str) -> list[str]:
    return [f"{tag} turn {i}: we moved 7,{i:03}.50 USD on 2025-01-0{1 + i % 9}" for i in range(n)]


def test_an_answer_grounded_by_the_tools_never_reads_the_history(scanned: list[str]) -> None:
    verdict = check("42 deposits, $12,345.67 on 3 December 2026.", TOOLS, history(200, "a"), tools_called=True)
    assert verdict.status == "grounded"
    assert scanned == []


def test_each_text_is_scanned_once_across_requests(scanned: list[str]) -> None:
    earlier = history(50, "b")
    first = check("We moved 7,003.50 USD.", TOOLS, earlier, tools_called=True)  # found only in the history
    assert [c.source for c in first.checks] == ["question"]
    assert len(scanned) == 50
    scanned.clear()
    new_turn = "b turn 50: and 9,999.99 USD"
    resent = [t.encode().decode() for t in earlier]  # the same texts, as new objects: a client sends them again
    again = check("We moved 7,003.50 USD.", TOOLS, [*resent, new_turn], tools_called=True)
    assert [c.source for c in again.checks] == ["question"]
    assert scanned == [new_turn]  # the 50 earlier texts came from the index


def test_the_index_is_bounded(scanned: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(context, "CACHE_TEXTS", 10)
    check("We moved 1.5 USD.", TOOLS, history(30, "c"), tools_called=True)
    assert len(context.INDEX.entries) == 10
    monkeypatch.setattr(context, "CACHE_CHARS", 100)
    check("We moved 1.5 USD.", TOOLS, history(30, "d"), tools_called=True)
    assert sum(map(len, context.INDEX.entries)) == context.INDEX.chars <= 100
