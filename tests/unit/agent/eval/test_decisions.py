"""Decision validity and the four questions, from records as the agent's trace fills them."""

from __future__ import annotations

import pytest

from agent.eval import decisions
from agent.eval.compare import compare
from agent.eval.errors import EvalError
from agent.eval.records import Call, Record
from agent.eval.report import render_comparison, render_run
from tests.unit.agent.eval.evalkit import record, run_of

REFUSED = "HTTP 502: The model's reply did not fit the tool-decision schema (TOOL_CALLING=constrained), so nothing ran."


def with_outcome(qid: str, expect: list[str], name: str, outcome: str, answer: str = "ok") -> Record:
    r = record(qid, expect, [(name, {})])
    r.calls = [Call(name, {}, outcome)]
    r.answer = answer
    return r


def test_validity_counts_calls_answers_and_refused_decisions() -> None:
    records = [
        record("none", [], []),  # one decision: answer (valid)
        with_outcome("ok", ["x"], "x", "ok"),  # call + answer: 2 valid
        with_outcome("invented", ["x"], "made_up", "unknown_tool"),  # 1 of 2 valid
        with_outcome("badargs", ["x"], "x", "invalid_arguments"),  # 1 of 2 valid
        record("refused", ["x"], [], error=REFUSED),  # 0 of 1
        record("down", ["x"], [], error="HTTP 503: the model server is down"),  # no decision at all
    ]
    records[0].answer = "Hello."
    scores = decisions.score(records)
    assert scores["validity"] == {"correct": 5, "total": 8, "rate": 0.625}
    assert scores["valid_arguments"] == {"correct": 1, "total": 2, "rate": 0.5}  # the invented name is not counted
    assert scores["called_when_needed"]["correct"] == 4 and scores["right_name"]["correct"] == 2


def test_a_call_written_as_text_is_an_invalid_answer_and_the_footer_is_not_read() -> None:
    assert decisions.call_as_text('Sure: {"name": "depozit_ozeti", "arguments": {}}')
    assert decisions.call_as_text("<tool_call>\n{...}")
    assert not decisions.call_as_text("12 deposits today.\n\n---\nTools used: depozit_ozeti")
    r = record("text", ["x"], [])
    r.answer = '{"name": "x", "parameters": {"a": 1}}'
    assert decisions.counts(r) == (0, 1) and decisions.score([r])["calls_as_text"] == 1


def test_the_report_and_compare_show_the_decisions() -> None:
    native = run_of([record("a", ["x"], [])], tool_calling="native")
    constrained = run_of([record("a", ["x"], [("x", {})])], tool_calling="constrained")
    assert "Tool calling: `constrained`" in render_run(constrained)
    assert "1. A tool called when needed" in render_run(constrained)
    text = render_comparison(compare(native, constrained), "n.json", "c.json")
    assert "| tool_calling | native | constrained | **changed** |" in text
    assert "| decisions.called_when_needed | 0/1 (0.0%) | 1/1 (100.0%) |" in text


def test_a_run_for_one_mode_is_refused_against_an_agent_in_the_other() -> None:
    assert decisions.check_mode("constrained", {"tool_calling": "constrained"}) == "constrained"
    assert decisions.check_mode(None, {}) is None
    with pytest.raises(EvalError, match="TOOL_CALLING=constrained"):
        decisions.check_mode("constrained", {"tool_calling": "native"})


@pytest.mark.parametrize(
    ("answer", "plain"),
    [
        ("12 deposits today, 4,500 USD in all.\n\n---\nTools used: depozit_ozeti", True),
        ("Bugün 12 para yatırma işlemi var.", True),
        ("Here is an example:\n```python\nprint([x for x in range(3)])\n```", True),
        ("42", True),  # a number is JSON too, and still an answer a person reads
        ('{"tool": "answer_directly"}', False),
        ('Sure. {"tool": "answer_directly"}', False),
        ('```json\n{"name": "depozit_ozeti", "arguments": {}}\n```', False),
        ('{"deposits": 12, "total": 4500}\n\n---\nTools used: depozit_ozeti', False),
        ('```json\n[{"symbol": "EURUSD", "long": 12}]\n```', False),
        ("   ", False),
    ],
    ids=[
        "prose",
        "turkish",
        "code-in-prose",
        "number",
        "decision",
        "decision-in-prose",
        "fenced-call",
        "json-object",
        "fenced-array",
        "empty",
    ],
)
def test_an_answer_is_plain_text_unless_it_is_json_a_decision_or_a_call(answer: str, plain: bool) -> None:
    assert decisions.plain_text(answer) is plain


def test_plain_text_is_scored_beside_validity_and_compared() -> None:
    prose, as_json = record("a", [], []), record("b", [], [])
    prose.answer, as_json.answer = "Hello.", '{"tool": "answer_directly"}'
    scores = decisions.score([prose, as_json, record("down", [], [], error="HTTP 503: down")])
    assert scores["plain_text"] == {"correct": 1, "total": 2, "rate": 0.5}  # a request not answered is not counted
    before, after = run_of([as_json], tool_calling="constrained"), run_of([prose], tool_calling="constrained")
    assert "| Answer is plain text (not JSON, no call or decision written out) | 0/1 (0.0%) |" in render_run(before)
    text = render_comparison(compare(before, after), "b.json", "a.json")
    assert "| decisions.plain_text | 0/1 (0.0%) | 1/1 (100.0%) |" in text
