"""Shared builders for agent-eval unit tests: records with calls, judged against a fixed date."""

from __future__ import annotations

import datetime as dt
from typing import Any

from agent.eval.records import Call, Record, Run
from agent.eval.scoring import judge, score

TODAY = dt.date(2026, 3, 10)


def record(
    qid: str,
    expect: list[str],
    calls: list[tuple[str, dict[str, Any]]] | None = None,
    *,
    args: dict[str, dict[str, Any]] | None = None,
    allow: list[str] | None = None,
    error: str | None = None,
    repeat: int = 1,
    tags: list[str] | None = None,
    lang: str = "en",
    latency: float = 1.0,
    offered: list[str] | None = None,
) -> Record:
    r = Record(
        id=qid,
        repeat=repeat,
        text=f"question {qid}",
        lang=lang,
        tags=tags or [],
        expect=expect,
        allow=allow or [],
        args=args or {},
    )
    r.calls = [Call(name, arguments) for name, arguments in calls or []]
    r.error, r.latency_s, r.rounds, r.offered = error, latency, 1 + bool(calls), offered
    return judge(r, TODAY)


def run_of(records: list[Record], **meta: object) -> Run:
    base = {"model": "qwen3:4b", "date": "2026-03-10", "tools_sha256": "a" * 64, "agent_info_available": True}
    return Run({**base, **meta}, records, score(records))


BEFORE = [
    record("same", ["x"], [("x", {})]),
    record("fixed", ["x"], [("y", {})]),
    record("broken", [], []),
    record("args", ["x"], [("x", {"s": "A"})]),
    record("gone", [], []),
]
AFTER = [
    record("same", ["x"], [("x", {})]),
    record("fixed", ["x"], [("x", {})]),
    record("broken", [], [("x", {})]),
    record("args", ["x"], [("x", {"s": "B"})]),  # still correct (no args stated) but called differently
    record("new", [], []),
]
