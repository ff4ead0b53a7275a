"""The model's tool-calling decisions: their validity and the four questions of a tool-calling evaluation.

A *decision* is one choice the model made: each tool call in the agent's trace, and, for every answered
question, its choice to answer. A call is valid when its tool is real and was offered to the caller and its
arguments fit that tool's schema (trace outcome not `unknown_tool`, `forbidden` or `invalid_arguments`); an answer
is valid unless its text holds a tool call written out as text. A request the agent refused because the model's
decision did not fit the schema (TOOL_CALLING=constrained, code `invalid_decision`) is one invalid decision.

The four questions: is a tool called when one is needed (and only then), is it the right one, are its arguments
valid, and is its result used in the answer (the grounding score). Read from the trace, never from answer text,
except the call-as-text check and, beside validity, whether the answer is plain text: what a person reads is prose,
not empty, not a JSON object or array (bare or fenced), not a decision or a call written out (issue 37: with every
decision valid, the answer was JSON on 20 of 24 questions).
"""

from __future__ import annotations

import json
import re
from typing import Any

from agent.eval import grounding
from agent.eval.errors import EvalError
from agent.eval.records import Record

INVALID_OUTCOMES = frozenset({"unknown_tool", "forbidden", "invalid_arguments"})
REFUSED_DECISION = "tool-decision schema"  # in the agent's invalid_decision message (agent.loop.constrained)
FOOTER = "\n\n---\nTools used:"
# A call written into the answer: Qwen/Hermes tags, or a JSON object naming a function/tool.
CALL_AS_TEXT = re.compile(
    r"<tool_call>|\{\s*\"(?:name|tool|function)\"\s*:\s*\"[^\"]+\"\s*,\s*\"(?:arguments|parameters)\""
)
MODES = ("native", "constrained")
DECISION_AS_TEXT = re.compile(r"\{\s*\"tool\"\s*:")  # a constrained decision ({"tool": "answer_directly"}) written out
FENCED = re.compile(r"```[A-Za-z]*[ \t]*\n(?P<body>.*?)\n?[ \t]*```", re.DOTALL)


def call_as_text(answer: str) -> bool:
    return bool(CALL_AS_TEXT.search(answer.split(FOOTER)[0]))


def plain_text(answer: str) -> bool:
    """The answer (before the tools footer) is prose a person can read: not empty, no call or decision written out,
    and not wholly a JSON object or array, bare or in one fence."""
    body = answer.split(FOOTER)[0].strip()
    if not body or call_as_text(body) or DECISION_AS_TEXT.search(body):
        return False
    fenced = FENCED.fullmatch(body)
    try:
        value = json.loads(fenced.group("body") if fenced else body)
    except ValueError:
        return True
    return not isinstance(value, dict | list)


def _rate(correct: int, total: int) -> dict[str, Any]:
    return {"correct": correct, "total": total, "rate": round(correct / total, 4) if total else None}


def counts(record: Record) -> tuple[int, int]:
    """(valid, all) decisions of one record."""
    if record.error is not None:
        refused = REFUSED_DECISION in record.error
        return 0, int(refused)
    valid = sum(c.outcome not in INVALID_OUTCOMES for c in record.calls)
    return valid + (not call_as_text(record.answer)), len(record.calls) + 1


def score(records: list[Record]) -> dict[str, Any]:
    answered = [r for r in records if r.error is None]
    tallies = [counts(r) for r in records]
    needing_called = [r for r in answered if r.needs_tool and r.calls]
    real_calls = [c for r in answered for c in r.calls if c.outcome not in ("unknown_tool", "forbidden")]
    rounds = sum(r.rounds for r in answered)
    return {
        "validity": _rate(sum(v for v, _ in tallies), sum(n for _, n in tallies)),
        "calls_as_text": sum(call_as_text(r.answer) for r in answered),
        "plain_text": _rate(sum(plain_text(r.answer) for r in answered), len(answered)),
        "called_when_needed": _rate(sum(bool(r.calls) == r.needs_tool for r in answered), len(answered)),
        "right_name": _rate(sum(all(t in r.called() for t in r.expect) for r in needing_called), len(needing_called)),
        "valid_arguments": _rate(sum(c.outcome != "invalid_arguments" for c in real_calls), len(real_calls)),
        "result_used": {k: v for k, v in grounding.score(records).items() if k in ("correct", "total", "rate")},
        "seconds_per_round": round(sum(r.latency_s for r in answered) / rounds, 3) if rounds else None,
    }


LABELS = {
    "validity": "Validity: decisions with a real, offered tool and schema-valid arguments",
    "plain_text": "Answer is plain text (not JSON, no call or decision written out)",
    "called_when_needed": "1. A tool called when needed, and only then",
    "right_name": "2. The right tool (questions needing one that got a call)",
    "valid_arguments": "3. Valid arguments (calls to a real tool)",
    "result_used": "4. Result used: every figure of the answer found in the tool results",
}


def _pct(part: Any) -> str:
    if not isinstance(part, dict) or part.get("rate") is None:
        return "n/a"
    return f"{part['correct']}/{part['total']} ({part['rate'] * 100:.1f}%)"


def render(meta: dict[str, Any], scores: dict[str, Any]) -> list[str]:
    """The report section: how the model was asked, then validity and the four questions."""
    d = scores.get("decisions") or {}
    if not d:
        return ["Not scored (a run from an older agent-eval)."]
    lines = [f"Tool calling: `{meta.get('tool_calling') or 'unknown'}`.", "", "| score | result |", "| --- | --- |"]
    lines += [f"| {label} | {_pct(d.get(key))} |" for key, label in LABELS.items()]
    lines += [
        f"| Seconds per round (latency / rounds) | {d.get('seconds_per_round', 'n/a')} |",
        "",
        f"Answers holding a tool call written as text: {d.get('calls_as_text', 0)}.",
    ]
    return lines


def score_rows(a: dict[str, Any], b: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """Rows for `compare`: each decision score before and after."""
    da, db = a.get("decisions") or {}, b.get("decisions") or {}
    keys = [*LABELS, "seconds_per_round"]
    return [(f"decisions.{k}", da.get(k), db.get(k)) for k in keys]


def check_mode(wanted: str | None, info: dict[str, Any] | None) -> str | None:
    """The agent's TOOL_CALLING; with `--tool-calling`, refuse a run against an agent set the other way."""
    actual = (info or {}).get("tool_calling")
    if wanted is not None and actual != wanted:
        shown = actual or "unknown (an agent without `tool_calling` in /v1/agent/info)"
        raise EvalError(
            f"--tool-calling {wanted}, but the agent runs TOOL_CALLING={shown}: restart agent-api with "
            f"TOOL_CALLING={wanted}, then run again"
        )
    return str(actual) if actual else None
