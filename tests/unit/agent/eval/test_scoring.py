"""Verdicts per record and the run's scores, on hand-made records whose right answers are known."""

from __future__ import annotations

from agent.eval import NO_TOOL
from agent.eval.scoring import confusion, confusion_pairs, per_tool, percentile, score
from tests.unit.agent.eval.evalkit import record


def test_verdicts() -> None:
    assert record("a", ["x"], [("x", {})]).verdict == "correct"
    assert record("a", ["x"], [("y", {})]).verdict == "wrong_tool"
    assert record("a", ["x"]).verdict == "missed_call"
    assert record("a", [], [("y", {})]).verdict == "spurious_call"
    assert record("a", ["x"], [("x", {}), ("y", {})]).verdict == "extra_call"
    assert record("a", ["x"], [("x", {"s": "B"})], args={"x": {"s": "A"}}).verdict == "wrong_arguments"
    assert record("a", ["x"], error="HTTP 503: down").verdict == "request_failed"
    assert record("a", [], []).verdict == "correct"


def test_allowed_tools_are_tolerated_but_not_enough() -> None:
    assert record("a", ["read"], [("find", {}), ("read", {})], allow=["find"]).verdict == "correct"
    assert record("a", ["read"], [("find", {})], allow=["find"]).verdict == "missed_call"


def test_invented_and_refused_tool_names_count_as_the_model_s_choice() -> None:
    r = record("a", ["x"], [("made_up_tool", {})])
    assert r.verdict == "wrong_tool" and confusion_pairs(r) == [("x", "made_up_tool")]


def test_arguments_any_call_of_the_tool_may_match() -> None:
    r = record("a", ["x"], [("x", {"s": "B"}), ("x", {"s": "A"})], args={"x": {"s": "A"}})
    assert (r.verdict, r.args_ok, r.arg_problems) == ("correct", True, [])
    wrong = record("a", ["x"], [("x", {"s": "B"})], args={"x": {"s": ["A", "C"]}})
    assert wrong.arg_problems == ["x.s: expected A | C, got 'B'"]


def test_arguments_are_not_checked_when_the_tool_was_not_called() -> None:
    r = record("a", ["x"], [("y", {})], args={"x": {"s": "A"}})
    assert (r.args_ok, r.selection_ok) == (None, False)


def test_confusion_pairs_for_several_expected_tools() -> None:
    r = record("a", ["find", "read"], [("find", {}), ("notes", {})])
    assert confusion_pairs(r) == [("find", "find"), ("read", "notes")]
    r2 = record("a", ["find", "read"], [("x", {})])
    assert confusion_pairs(r2) == [("find", "x"), ("read", NO_TOOL)]
    assert confusion_pairs(record("a", [])) == [(NO_TOOL, NO_TOOL)]
    assert confusion_pairs(record("a", ["x"], error="boom")) == []


def test_per_tool_precision_and_recall_from_the_matrix() -> None:
    records = [
        record("1", ["dep"], [("dep", {})]),
        record("2", ["dep"], [("wd", {})]),
        record("3", ["wd"], [("wd", {})]),
        record("4", [], [("wd", {})]),
        record("5", ["dep"]),
    ]
    matrix = confusion(records)
    assert matrix == {"(none)": {"wd": 1}, "dep": {"(none)": 1, "dep": 1, "wd": 1}, "wd": {"wd": 1}}
    per = per_tool(matrix)
    assert per["dep"] == {"tp": 1, "fp": 0, "fn": 2, "support": 3, "precision": 1.0, "recall": 0.3333}
    assert per["wd"] == {"tp": 1, "fp": 2, "fn": 0, "support": 1, "precision": 0.3333, "recall": 1.0}
    assert per[NO_TOOL] == {"tp": 0, "fp": 1, "fn": 1, "support": 1, "precision": 0.0, "recall": 0.0}


def test_percentile_interpolates_like_numpy() -> None:
    assert percentile([], 50) is None
    assert percentile([3.0], 95) == 3.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert percentile([float(n) for n in range(1, 21)], 95) == 19.05


def test_score_splits_tool_and_no_tool_questions_and_leaves_failures_unscored() -> None:
    records = [
        record("t1", ["x"], [("x", {"a": 1})], args={"x": {"a": 1}}, tags=["core"], latency=2.0),
        record("t2", ["x"], [("y", {})], tags=["core"], lang="tr", latency=4.0),
        record("n1", [], [], latency=1.0),
        record("n2", [], [("x", {})], lang="tr", latency=3.0),
        record("f1", ["x"], error="HTTP 504: timeout", latency=9.0),
    ]
    s = score(records)
    # the failed request is no answer: counted apart, never as the model's mistake
    assert s["accuracy"] == {"correct": 2, "total": 4, "rate": 0.5} and s["unanswered"] == 1 and s["records"] == 5
    assert s["tool_needed"] == {"correct": 1, "total": 2, "rate": 0.5}
    assert s["no_tool"] == {"correct": 1, "total": 2, "rate": 0.5}
    assert s["arguments"] == {"correct": 1, "total": 1, "rate": 1.0}
    assert s["verdicts"]["request_failed"] == 1 and s["verdicts"]["spurious_call"] == 1
    assert s["latency_s"] == {"p50": 2.5, "p95": 3.85, "mean": 2.5, "max": 4.0}  # failed requests left out
    assert s["by_tag"] == {"core": {"correct": 1, "total": 2, "rate": 0.5}}
    assert s["by_lang"]["tr"] == {"correct": 0, "total": 2, "rate": 0.0}
    assert s["rounds"]["histogram"] == {"1": 1, "2": 3}


def test_variance_over_repeats_names_unstable_questions() -> None:
    records = [
        record("a", ["x"], [("x", {})], repeat=1),
        record("b", [], [], repeat=1),
        record("a", ["x"], [("y", {})], repeat=2),
        record("b", [], [], repeat=2),
    ]
    v = score(records)["variance"]
    assert [p["rate"] for p in v["per_repeat"]] == [1.0, 0.5]
    assert (v["rate_min"], v["rate_max"], v["rate_mean"], v["rate_stdev"]) == (0.5, 1.0, 0.75, 0.25)
    assert v["unstable"] == ["a"]
