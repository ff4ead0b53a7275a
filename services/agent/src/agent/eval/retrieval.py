"""Was the needed tool offered at all? Tool retrieval's recall, kept apart from the model's own choice.

Read from the agent's trace (`local_agent.retrieval`, see docs/tools.md "Tool retrieval"): a record carries
the offered tool names only when retrieval narrowed the list (mode not `off`, fewer tools offered than the
caller may use). A question that needs a tool the agent did not offer, and that the model therefore did not
call, is `retrieval_missed`: the model never had the choice, so it is not counted as the model's mistake.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from agent.eval.records import Record


def offered_names(trace: Any) -> list[str] | None:
    """The offered names when the agent narrowed the list; None when it offered every allowed tool."""
    if not isinstance(trace, dict) or trace.get("mode") in (None, "off"):
        return None
    names = [str(o.get("name")) for o in trace.get("offered") or [] if isinstance(o, dict)]
    return names if len(names) < int(trace.get("allowed") or 0) else None


def missed(record: Record) -> bool:
    """A needed tool was neither offered nor called: retrieval's miss, not the model's."""
    if record.offered is None:
        return False
    called = set(record.called())
    return any(t not in record.offered and t not in called for t in record.expect)


def _rate(ok: int, total: int) -> dict[str, Any]:
    return {"correct": ok, "total": total, "rate": round(ok / total, 4) if total else None}


def score(records: list[Record]) -> dict[str, Any]:
    """recall (questions needing a tool whose tools were all offered) and the model's choice where they were,
    overall and per language."""
    answered = [r for r in records if r.error is None]
    need = [r for r in answered if r.needs_tool]
    given = [r for r in answered if not missed(r)]
    by_lang: dict[str, dict[str, Any]] = defaultdict(dict)
    for lang in sorted({r.lang for r in answered}):
        n = [r for r in need if r.lang == lang]
        g = [r for r in given if r.lang == lang]
        by_lang[lang] = {
            "recall": _rate(sum(not missed(r) for r in n), len(n)),
            "model_choice": _rate(sum(r.selection_ok for r in g), len(g)),
        }
    return {
        "narrowed": sum(r.offered is not None for r in answered),
        "recall": _rate(sum(not missed(r) for r in need), len(need)),
        "model_choice": _rate(sum(r.selection_ok for r in given), len(given)),
        "by_lang": dict(by_lang),
    }


def _pct(part: dict[str, Any]) -> str:
    return "n/a" if part.get("rate") is None else f"{part['correct']}/{part['total']} ({part['rate'] * 100:.1f}%)"


def render(scores: dict[str, Any], records: list[Record]) -> list[str]:
    """The report section: recall and the model's choice per language, then each question retrieval missed."""
    s = scores or {}
    if not s.get("narrowed"):
        return ["The agent offered every allowed tool (TOOL_RETRIEVAL=off, or an agent before issue 17)."]
    lines = [
        f"Retrieval narrowed the tool list for {s['narrowed']} answers. Recall (every needed tool offered): "
        f"{_pct(s['recall'])}; the model's choice where it was offered: {_pct(s['model_choice'])}.",
        "",
        "| language | recall | model's choice when offered |",
        "| --- | --- | --- |",
    ]
    lines += [f"| {k} | {_pct(v['recall'])} | {_pct(v['model_choice'])} |" for k, v in s.get("by_lang", {}).items()]
    rows = [r for r in records if r.verdict == "retrieval_missed"]
    if rows:
        lines += ["", "| question | expected | offered |", "| --- | --- | --- |"]
        lines += [f"| {r.id} (#{r.repeat}) | {', '.join(r.expect)} | {', '.join(r.offered or [])} |" for r in rows]
    return lines
