"""Scoring: a verdict for each record, then the run's scores (accuracy, per tool, confusion, args, latency).

Selection is judged on the set of tool names the model called (every call in the trace, refused or
invented ones included: they are the model's choice). The headline accuracy is tool selection, the number
the original system reported (26/27); argument correctness is scored beside it, never hidden inside it.
"""

from __future__ import annotations

import datetime as dt
import math
import statistics
from collections import Counter, defaultdict
from typing import Any

from agent.eval import NO_TOOL, decisions, grounding, retrieval
from agent.eval.matchers import describe, matches
from agent.eval.records import VERDICTS, Record, Verdict


def _arg_problems(record: Record, today: dt.date) -> list[str] | None:
    """Problems with the stated arguments; None when nothing can be checked (no spec, or tool not called)."""
    if not record.args or any(tool not in record.called() for tool in record.args):
        return None
    problems: list[str] = []
    for tool, specs in record.args.items():
        calls = [c for c in record.calls if c.name == tool]
        if any(all(matches(s, c.arguments.get(a), today) for a, s in specs.items()) for c in calls):
            continue
        got = calls[0].arguments
        problems += [
            f"{tool}.{a}: expected {describe(s)}, got {got.get(a)!r}"
            for a, s in specs.items()
            if not matches(s, got.get(a), today)
        ]
    return problems


def judge(record: Record, today: dt.date) -> Record:
    """Fill in the record's verdict, selection_ok, args_ok and arg_problems."""
    called = record.called()
    missed = [t for t in record.expect if t not in called]
    extra = [t for t in called if t not in record.expect and t not in record.allow]
    problems = _arg_problems(record, today)
    record.args_ok = None if problems is None else not problems
    record.arg_problems = problems or []
    record.selection_ok = record.error is None and not missed and not extra
    verdict: Verdict = "correct"
    if record.error is not None:
        verdict = "request_failed"
    elif retrieval.missed(record):  # the model never had the choice: not its mistake
        verdict = "retrieval_missed"
    elif missed and extra:
        verdict = "wrong_tool"
    elif missed:
        verdict = "missed_call"
    elif extra:
        verdict = "spurious_call" if not record.needs_tool else "extra_call"
    elif record.args_ok is False:
        verdict = "wrong_arguments"
    record.verdict = verdict
    return record


def confusion_pairs(record: Record) -> list[tuple[str, str]]:
    """(expected, called) pairs for the confusion matrix; a missing side is NO_TOOL."""
    if record.error is not None:
        return []
    called = [t for t in record.called() if t not in record.allow or t in record.expect]
    pairs = [(t, t) for t in record.expect if t in called]
    missed = [t for t in record.expect if t not in called]
    extra = [t for t in called if t not in record.expect]
    for i in range(max(len(missed), len(extra))):
        pairs.append((missed[i] if i < len(missed) else NO_TOOL, extra[i] if i < len(extra) else NO_TOOL))
    return pairs or [(NO_TOOL, NO_TOOL)]


def _rate(correct: int, total: int) -> dict[str, Any]:
    return {"correct": correct, "total": total, "rate": round(correct / total, 4) if total else None}


def percentile(values: list[float], q: float) -> float | None:
    """Linear-interpolated percentile (q in 0..100), as numpy's default; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return round(ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo), 3)


def confusion(records: list[Record]) -> dict[str, dict[str, int]]:
    matrix: dict[str, dict[str, int]] = defaultdict(dict)
    for record in records:
        for expected, called in confusion_pairs(record):
            matrix[expected][called] = matrix[expected].get(called, 0) + 1
    return {row: dict(sorted(cols.items())) for row, cols in sorted(matrix.items())}


def per_tool(matrix: dict[str, dict[str, int]]) -> dict[str, dict[str, Any]]:
    """Precision and recall per label from the confusion matrix (NO_TOOL is the 'abstain' label)."""
    labels = sorted(set(matrix) | {c for cols in matrix.values() for c in cols})
    out: dict[str, dict[str, Any]] = {}
    for label in labels:
        tp = matrix.get(label, {}).get(label, 0)
        support = sum(matrix.get(label, {}).values())
        predicted = sum(cols.get(label, 0) for cols in matrix.values())
        out[label] = {
            "tp": tp,
            "fp": predicted - tp,
            "fn": support - tp,
            "support": support,
            "precision": round(tp / predicted, 4) if predicted else None,
            "recall": round(tp / support, 4) if support else None,
        }
    return out


def _grouped(records: list[Record], key: str) -> dict[str, dict[str, Any]]:
    groups: dict[str, list[Record]] = defaultdict(list)
    for r in records:
        for name in r.tags if key == "tags" else [r.lang]:
            groups[name].append(r)
    return {k: _rate(sum(r.selection_ok for r in rs), len(rs)) for k, rs in sorted(groups.items())}


def _signature(r: Record) -> tuple[str, tuple[str, ...]]:
    return r.verdict, tuple(r.called())


def variance(records: list[Record]) -> dict[str, Any]:
    """Run-to-run variance: accuracy per repeat and the questions whose outcome differed between repeats."""
    repeats = sorted({r.repeat for r in records})
    per_repeat = [
        _rate(sum(r.selection_ok for r in records if r.repeat == n), sum(1 for r in records if r.repeat == n))
        for n in repeats
    ]
    rates = [p["rate"] for p in per_repeat if p["rate"] is not None]
    by_id: dict[str, set[tuple[str, tuple[str, ...]]]] = defaultdict(set)
    for r in records:
        by_id[r.id].add(_signature(r))
    unstable = sorted(i for i, sigs in by_id.items() if len(sigs) > 1)
    return {
        "repeats": len(repeats),
        "per_repeat": per_repeat,
        "rate_min": min(rates, default=None),
        "rate_max": max(rates, default=None),
        "rate_mean": round(statistics.fmean(rates), 4) if rates else None,
        "rate_stdev": round(statistics.pstdev(rates), 4) if rates else None,
        "unstable": unstable,
    }


def score(records: list[Record]) -> dict[str, Any]:
    """Every score of a run; records must already be judged. A request that got no answer (refused, failed) is
    counted apart (`unanswered`) and scored nowhere: it says nothing about the model."""
    everything, records = records, [r for r in records if r.error is None]
    tool_q = [r for r in records if r.needs_tool]
    no_tool_q = [r for r in records if not r.needs_tool]
    checked = [r for r in records if r.args_ok is not None]
    answered = records
    latencies = [r.latency_s for r in answered]
    matrix = confusion(records)
    counts = Counter(r.verdict for r in everything)
    return {
        "questions": len({r.id for r in everything}),
        "records": len(everything),
        "unanswered": len(everything) - len(records),
        "accuracy": _rate(sum(r.selection_ok for r in records), len(records)),
        "strict_accuracy": _rate(sum(r.verdict == "correct" for r in records), len(records)),
        "tool_needed": _rate(sum(r.selection_ok for r in tool_q), len(tool_q)),
        "no_tool": _rate(sum(r.selection_ok for r in no_tool_q), len(no_tool_q)),
        "arguments": _rate(sum(bool(r.args_ok) for r in checked), len(checked)),
        "grounding": grounding.score(records),
        "decisions": decisions.score(records),
        "retrieval": retrieval.score(records),
        "verdicts": {v: counts.get(v, 0) for v in VERDICTS},
        "per_tool": per_tool(matrix),
        "confusion": matrix,
        "by_tag": _grouped(records, "tags"),
        "by_lang": _grouped(records, "lang"),
        "latency_s": {
            "p50": percentile(latencies, 50),
            "p95": percentile(latencies, 95),
            "mean": round(statistics.fmean(latencies), 3) if latencies else None,
            "max": max(latencies, default=None),
        },
        "rounds": {
            "mean": round(statistics.fmean([r.rounds for r in answered]), 3) if answered else None,
            "max": max((r.rounds for r in answered), default=None),
            "histogram": {str(k): v for k, v in sorted(Counter(r.rounds for r in answered).items())},
        },
        "variance": variance(records),
    }
