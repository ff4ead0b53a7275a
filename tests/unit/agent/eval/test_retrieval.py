"""agent-eval's view of tool retrieval: a needed tool never offered is `retrieval_missed`, and recall is
scored apart from the model's choice, per language."""

from __future__ import annotations

from agent.eval.records import Run
from agent.eval.report import render_run
from agent.eval.retrieval import offered_names
from agent.eval.scoring import score
from tests.unit.agent.eval.evalkit import record


def trace(mode: str, names: list[str], allowed: int) -> dict[str, object]:
    return {"mode": mode, "top_k": 2, "allowed": allowed, "offered": [{"name": n, "why": "rank"} for n in names]}


def test_offered_names_only_when_retrieval_narrowed_the_list() -> None:
    assert offered_names(trace("lexical", ["a", "b"], 11)) == ["a", "b"]
    assert offered_names(trace("off", ["a", "b"], 2)) is None
    assert offered_names(trace("lexical", ["a", "b"], 2)) is None  # every allowed tool: nothing was withheld
    assert offered_names(None) is None and offered_names("garbage") is None


def test_a_needed_tool_not_offered_is_retrieval_missed_not_the_model_s_mistake() -> None:
    assert record("a", ["dep"], offered=["wd", "pos"]).verdict == "retrieval_missed"
    assert record("a", ["dep"], [("wd", {})], offered=["wd", "pos"]).verdict == "retrieval_missed"
    assert record("a", ["dep"], [("wd", {})], offered=["dep", "wd"]).verdict == "wrong_tool"
    assert record("a", ["dep"], [("dep", {})], offered=["wd"]).verdict == "correct"  # called anyway (allowed)
    assert record("a", [], offered=["wd"]).verdict == "correct"
    assert record("a", ["dep"], error="HTTP 503", offered=["wd"]).verdict == "request_failed"


def test_recall_and_the_model_s_choice_are_scored_apart_per_language() -> None:
    records = [
        record("1", ["dep"], [("dep", {})], offered=["dep", "wd"], lang="en"),
        record("2", ["dep"], [("wd", {})], offered=["dep", "wd"], lang="en"),  # offered, model chose wrong
        record("3", ["dep"], offered=["wd", "pos"], lang="tr"),  # retrieval missed
        record("4", ["wd"], [("wd", {})], offered=["wd", "pos"], lang="tr"),
        record("5", [], offered=["wd", "pos"], lang="tr"),
    ]
    s = score(records)
    assert s["verdicts"]["retrieval_missed"] == 1
    r = s["retrieval"]
    assert r["narrowed"] == 5
    assert r["recall"] == {"correct": 3, "total": 4, "rate": 0.75}
    assert r["model_choice"] == {"correct": 3, "total": 4, "rate": 0.75}
    assert r["by_lang"]["en"] == {
        "recall": {"correct": 2, "total": 2, "rate": 1.0},
        "model_choice": {"correct": 1, "total": 2, "rate": 0.5},
    }
    assert r["by_lang"]["tr"]["recall"] == {"correct": 1, "total": 2, "rate": 0.5}
    assert r["by_lang"]["tr"]["model_choice"] == {"correct": 2, "total": 2, "rate": 1.0}
    report = render_run(Run({"model": "m"}, records, s))
    section = report.split("## Retrieval")[1].split("## Grounding")[0]
    assert "| tr | 1/2 (50.0%) | 2/2 (100.0%) |" in section
    assert "| 3 (#1) | dep | wd, pos |" in section


def test_a_run_without_retrieval_says_so() -> None:
    records = [record("1", ["dep"], [("dep", {})])]
    report = render_run(Run({"model": "m"}, records, score(records)))
    assert "offered every allowed tool" in report.split("## Retrieval")[1]
