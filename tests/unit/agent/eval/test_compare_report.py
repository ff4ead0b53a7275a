"""compare (two runs, question by question), the Markdown reports, and run files on disk."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.eval.compare import compare
from agent.eval.errors import RunFileError
from agent.eval.records import load_run
from agent.eval.report import render_comparison, render_run, render_summary
from tests.unit.agent.eval.evalkit import AFTER, BEFORE, record, run_of


def test_compare_classifies_each_changed_question() -> None:
    c = compare(run_of(BEFORE), run_of(AFTER))
    assert [(q.id, q.change) for q in c.questions] == [
        ("fixed", "fixed"),
        ("broken", "broken"),
        ("args", "changed"),
        ("gone", "removed"),
        ("new", "added"),
    ]
    scores = {k: (a, b) for k, a, b in c.scores}
    assert scores["no_tool"][0]["correct"] == 2 and scores["no_tool"][1]["correct"] == 1


def test_compare_ignores_answer_wording_and_latency() -> None:
    again = [record(r.id, r.expect, [(c.name, c.arguments) for c in r.calls], latency=9.9) for r in BEFORE]
    for r in again:
        r.answer = "different words"
    assert compare(run_of(BEFORE), run_of(again)).questions == []


def test_compare_names_changed_fingerprints_and_tools() -> None:
    a = run_of(BEFORE, tool_sha256={"x": "1", "y": "2"}, system_prompt_sha256="p1")
    b = run_of(BEFORE, tool_sha256={"x": "1", "y": "3", "z": "4"}, system_prompt_sha256="p2")
    c = compare(a, b)
    assert c.tools_changed == ["y", "z"]
    text = render_comparison(c, "a.json", "b.json")
    assert "| system_prompt_sha256 | p1 | p2 | **changed** |" in text
    assert "Tool descriptions that changed: y, z." in text
    assert "None: every question behaved as before." in text


def test_run_report_shows_mistakes_matrix_and_variance() -> None:
    records = [*BEFORE, record("fixed", ["x"], [("x", {})], repeat=2)]
    text = render_run(run_of(records, agent_info_available=False))
    assert "| Tool selection (headline) | 5/6 (83.3%) |" in text
    assert "| fixed | 1 | question fixed | x | y() | wrong_tool |" in text
    assert "| x | 3 | **1** |" in text or "| x |  | 3 | **1** |" in text
    assert "- x → y: 1" in text  # the confusion to act on, above the full matrix
    assert "Questions whose outcome changed between repeats: fixed." in text
    assert "no `/v1/agent/info`" in text


def test_summary_puts_models_side_by_side() -> None:
    text = render_summary([run_of(BEFORE), run_of(AFTER, model="qwen2.5:3b")])
    assert "| score | qwen3:4b | qwen2.5:3b |" in text
    assert "| Tool selection (headline) | 4/5 (80.0%) | 4/5 (80.0%) |" in text


def test_run_file_round_trip(tmp_path: Path) -> None:
    run = run_of(BEFORE)
    run.save(tmp_path / "r" / "m.json")
    loaded = load_run(tmp_path / "r")
    assert loaded.records == run.records and loaded.meta == run.meta and loaded.scores == run.scores


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("not json", "not a readable JSON"),
        ('{"format": "other"}', "not an agent-eval run"),
        ('{"format": "agent-eval/1", "records": [{"id": 1}]}', "malformed record"),
    ],
)
def test_bad_run_files_are_named(tmp_path: Path, content: str, why: str) -> None:
    path = tmp_path / "x.json"
    path.write_text(content)
    with pytest.raises(RunFileError, match=why):
        load_run(path)


def test_a_directory_must_hold_one_run(tmp_path: Path) -> None:
    run_of(BEFORE).save(tmp_path / "a.json")
    run_of(BEFORE).save(tmp_path / "b.json")
    with pytest.raises(RunFileError, match="exactly one run JSON"):
        load_run(tmp_path)
