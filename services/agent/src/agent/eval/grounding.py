"""The fourth question of a tool-calling evaluation: is the final answer what the tools returned?

Read from the agent's trace (`local_agent.grounding`, see docs/grounding.md), never recomputed here: the
score is the share of answers stating figures whose every figure was found in the tool results. Answers
without figures, and figures given without tools to a question not asking for a quantity ("general":
arithmetic, general knowledge) are not counted; a quantity stated with no tool call counts as ungrounded.
"""

from __future__ import annotations

from typing import Any

from agent.eval.records import Record

WITH_FIGURES = ("grounded", "ungrounded", "no_tool_call")


def status(record: Record) -> str | None:
    """The record's grounding status, or None when the agent reported none (an older agent, a failed request)."""
    value = (record.grounding or {}).get("status")
    return str(value) if value else None


def score(records: list[Record]) -> dict[str, Any]:
    judged = [r for r in records if status(r) in WITH_FIGURES]
    grounded = sum(status(r) == "grounded" for r in judged)
    figures = sum(int((r.grounding or {}).get("figures") or 0) for r in judged)
    ungrounded = sum(len((r.grounding or {}).get("ungrounded") or []) for r in judged)
    return {
        "correct": grounded,
        "total": len(judged),
        "rate": round(grounded / len(judged), 4) if judged else None,
        "no_tool_call": sum(status(r) == "no_tool_call" for r in judged),
        "no_figures": sum(status(r) == "no_figures" for r in records),
        "general": sum(status(r) == "general" for r in records),
        "not_reported": sum(status(r) is None and r.error is None for r in records),
        "figures": figures,
        "figures_grounded": figures - ungrounded,
    }


def render(scores: dict[str, Any], records: list[Record]) -> list[str]:
    """The report section: the score, then each ungrounded figure next to the tool data it was checked against."""
    s = scores or {}
    if not s.get("total"):
        missing = s.get("not_reported")
        why = f" ({missing} answers carried no grounding verdict: an agent before issue 16?)" if missing else ""
        return [f"No answer stated a figure{why}."]
    lines = [
        f"Answers with figures: {s['total']}; every figure found in the tool results: {s['correct']} "
        f"({s['rate'] * 100:.1f}%). Figures checked: {s['figures']}, found: {s['figures_grounded']}. "
        f"Figures stated without any tool call: {s['no_tool_call']} answers.",
        "",
    ]
    rows = [(r, item) for r in records if status(r) in ("ungrounded", "no_tool_call") for item in _ungrounded(r)]
    if not rows:
        return lines
    lines += [
        "| question | figure | kind | nearest tool figure | tools called |",
        "| --- | --- | --- | --- | --- |",
    ]
    for r, item in rows:
        tools = ", ".join(r.called()) or "none"
        nearest = str(item.get("nearest") or "—")
        lines.append(
            f"| {r.id} (#{r.repeat}) | {_cell(item.get('text'))} | {item.get('kind')} | {_cell(nearest)} | {tools} |"
        )
    return lines


def _ungrounded(record: Record) -> list[dict[str, Any]]:
    return [i for i in (record.grounding or {}).get("ungrounded") or [] if isinstance(i, dict)]


def _cell(value: Any) -> str:
    return " ".join(str(value).split()).replace("|", "\\|")[:60]
