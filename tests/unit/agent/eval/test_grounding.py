"""agent-eval's fourth question: grounding scored per question and overall from the trace, and reported."""

from __future__ import annotations

from typing import Any

from agent.eval.grounding import score
from agent.eval.report import render_run
from tests.unit.agent.eval.evalkit import record, run_of


def verdict(status: str, figures: int = 0, *ungrounded: tuple[str, str, str]) -> dict[str, Any]:
    return {
        "status": status,
        "figures": figures,
        "ungrounded": [{"text": t, "kind": k, "source": "none", "nearest": n} for t, k, n in ungrounded],
    }


def records() -> list[Any]:
    rs = [record(q, ["depozit_ozeti"], [("depozit_ozeti", {})]) for q in ("ok", "bad", "none", "old")]
    rs.append(record("guess", ["kyc"], []))
    rs[0].grounding = verdict("grounded", 3)
    rs[1].grounding = verdict("ungrounded", 2, ("$5,432.10", "amount", "12345.67 (depozit_ozeti)"))
    rs[2].grounding = verdict("no_figures")
    rs[4].grounding = verdict("no_tool_call", 1, ("125", "count", ""))
    return rs  # rs[3]: an agent that reports no grounding


def test_score_counts_answers_with_figures_only() -> None:
    s = score(records())
    assert (s["correct"], s["total"], s["rate"]) == (1, 3, 0.3333)
    assert (s["no_tool_call"], s["no_figures"], s["not_reported"]) == (1, 1, 1)
    assert (s["figures"], s["figures_grounded"]) == (6, 4)


def test_report_lists_each_ungrounded_figure_next_to_the_tool_data() -> None:
    text = render_run(run_of(records()))
    assert "| Grounding: every figure found in the tool results | 1/3 (33.3%) |" in text
    assert "| bad (#1) | $5,432.10 | amount | 12345.67 (depozit_ozeti) | depozit_ozeti |" in text
    assert "| guess (#1) | 125 | count | — | none |" in text


def test_a_run_without_grounding_verdicts_says_so() -> None:
    rs = [record("old", ["x"], [("x", {})])]
    assert "carried no grounding verdict" in render_run(run_of(rs))
