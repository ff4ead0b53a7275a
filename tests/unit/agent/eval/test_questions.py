"""Loading a question set: a valid file, and every malformed one rejected with the question named."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.eval.errors import QuestionSetError
from agent.eval.questions import load_questions, parse_questions

GOOD = """
version: 1
questions:
  - {id: a, text: "What time is it?", expect: [sistem_bilgisi], tags: [core]}
  - id: b
    text: "Deposits yesterday?"
    lang: en
    expect: [depozit_ozeti]
    allow: [sistem_bilgisi]
    args: {depozit_ozeti: {start_date: {date: yesterday}}}
    tags: [border]
    note: why this question exists
  - {id: c, text: "2+2?", expect: [], lang: tr}
"""


def test_parses_a_valid_set() -> None:
    qs = parse_questions(GOOD, "good.yaml")
    assert [q.id for q in qs.questions] == ["a", "b", "c"]
    b = qs.questions[1]
    assert (b.expect, b.allow, b.args, b.note) == (
        ["depozit_ozeti"],
        ["sistem_bilgisi"],
        {"depozit_ozeti": {"start_date": {"date": "yesterday"}}},
        "why this question exists",
    )
    assert [q.needs_tool for q in qs.questions] == [True, True, False]
    assert len(qs.sha256) == 64 and qs.source == "good.yaml"


def test_select_by_id_or_tag() -> None:
    qs = parse_questions(GOOD)
    assert [q.id for q in qs.select(["c"], ["border"]).questions] == ["b", "c"]
    assert qs.select(None, None) is qs


@pytest.mark.parametrize(
    ("text", "where", "problem"),
    [
        ("questions: [{id: a, text: t, expect: [], colour: red}]", "'a'", "unknown keys ['colour']"),
        ("questions: [{id: a, text: t}]", "'a'", "expect is required"),
        ("questions: [{id: a, text: '', expect: []}]", "'a'", "text must be"),
        ("questions: [{id: a, text: t, expect: x}]", "'a'", "expect must be a list"),
        ("questions: [{id: a, text: t, expect: []}, {id: a, text: u, expect: []}]", "'a'", "duplicate id"),
        ("questions: [{id: a, text: t, expect: [x], args: {y: {p: 1}}}]", "'a'", "not in expect"),
        ("questions: [{id: a, text: t, expect: [x], args: {x: {p: {regex: '('}}}}]", "'a'", "args.x.p: regex"),
        ("questions: [{id: a, text: t, expect: [x], args: {x: {}}}]", "'a'", "args.x must map"),
        ("questions: []", "questions", "empty"),
        ("qs: []", "top level", "`questions:` list"),
        ("questions: [1]", "#1", "mapping"),
        ("version: 1\nextra: 2\nquestions: [{id: a, text: t, expect: []}]", "top level", "unknown keys"),
        ("questions: [", "YAML", ""),
    ],
)
def test_malformed_sets_name_the_problem(text: str, where: str, problem: str) -> None:
    with pytest.raises(QuestionSetError) as info:
        parse_questions(text, "ops.yaml")
    assert where in info.value.where and problem in info.value.problem
    assert str(info.value).startswith("ops.yaml: ")


def test_missing_file_is_a_question_set_error(tmp_path: Path) -> None:
    with pytest.raises(QuestionSetError, match="cannot read it"):
        load_questions(tmp_path / "nope.yaml")
