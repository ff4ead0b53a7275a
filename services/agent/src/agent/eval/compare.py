"""Two runs side by side: what was measured differently, how the scores moved, which questions changed.

A question changed when, for some repeat, its verdict or the tools it called (names and arguments)
differ; answer wording and latency are ignored, since they vary on every run.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Literal

from agent.eval import decisions
from agent.eval.records import Record, Run

Change = Literal["fixed", "broken", "changed", "added", "removed"]
META_KEYS = (
    "model",
    "tool_calling",
    "tool_decision",
    "ollama_version",
    "api_version",
    "agent_version",
    "system_prompt_sha256",
    "tools_sha256",
    "questions_sha256",
    "question_count",
    "repeat",
    "date",
    "base_url",
)
SCORE_KEYS = ("accuracy", "strict_accuracy", "tool_needed", "no_tool", "arguments", "grounding")


@dataclass
class QuestionChange:
    id: str
    change: Change
    text: str
    before: list[Record] = field(default_factory=list)
    after: list[Record] = field(default_factory=list)


@dataclass
class Comparison:
    meta: list[tuple[str, Any, Any]]  # (key, before, after) for every fact recorded
    tools_changed: list[str]  # tools whose description fingerprint differs (needs per-tool fingerprints)
    scores: list[tuple[str, Any, Any]]
    questions: list[QuestionChange]

    def to_dict(self) -> dict[str, Any]:
        return {
            "meta": [{"key": k, "before": a, "after": b} for k, a, b in self.meta],
            "tools_changed": self.tools_changed,
            "scores": [{"key": k, "before": a, "after": b} for k, a, b in self.scores],
            "questions": [
                {
                    "id": q.id,
                    "change": q.change,
                    "text": q.text,
                    "before": [_brief(r) for r in q.before],
                    "after": [_brief(r) for r in q.after],
                }
                for q in self.questions
            ],
        }


def _brief(r: Record) -> dict[str, Any]:
    return {"repeat": r.repeat, "verdict": r.verdict, "calls": [[c.name, c.arguments] for c in r.calls]}


def _behaviour(records: list[Record]) -> list[tuple[int, str, str]]:
    return sorted(
        (r.repeat, r.verdict, json.dumps([[c.name, c.arguments] for c in r.calls], sort_keys=True)) for r in records
    )


def _classify(before: list[Record], after: list[Record]) -> Change | None:
    if not before:
        return "added"
    if not after:
        return "removed"
    if _behaviour(before) == _behaviour(after):
        return None
    was_ok, is_ok = all(r.verdict == "correct" for r in before), all(r.verdict == "correct" for r in after)
    if is_ok and not was_ok:
        return "fixed"
    if was_ok and not is_ok:
        return "broken"
    return "changed"


def _by_id(run: Run) -> dict[str, list[Record]]:
    grouped: dict[str, list[Record]] = defaultdict(list)
    for r in run.records:
        grouped[r.id].append(r)
    return grouped


def _tools_changed(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    before, after = a.get("tool_sha256") or {}, b.get("tool_sha256") or {}
    if not before or not after:
        return []
    return sorted(t for t in set(before) | set(after) if before.get(t) != after.get(t))


def _score_rows(a: dict[str, Any], b: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    rows: list[tuple[str, Any, Any]] = [(k, a.get(k), b.get(k)) for k in SCORE_KEYS]
    for part, key in (("latency_s", "p50"), ("latency_s", "p95"), ("rounds", "mean")):
        rows.append((f"{part}.{key}", (a.get(part) or {}).get(key), (b.get(part) or {}).get(key)))
    return rows + decisions.score_rows(a, b)


def compare(a: Run, b: Run) -> Comparison:
    before, after = _by_id(a), _by_id(b)
    order = list(before) + [i for i in after if i not in before]
    changes: list[QuestionChange] = []
    for qid in order:
        kind = _classify(before.get(qid, []), after.get(qid, []))
        if kind is not None:
            text = (before.get(qid) or after[qid])[0].text
            changes.append(QuestionChange(qid, kind, text, before.get(qid, []), after.get(qid, [])))
    return Comparison(
        meta=[(k, a.meta.get(k), b.meta.get(k)) for k in META_KEYS],
        tools_changed=_tools_changed(a.meta, b.meta),
        scores=_score_rows(a.scores, b.scores),
        questions=changes,
    )
