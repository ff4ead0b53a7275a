"""The shipped evals/questions.yaml: it loads, covers what the issue asks, and matches the real tools."""

from __future__ import annotations

import inspect
from collections import Counter
from pathlib import Path

import pytest

from agent.eval.questions import Question, load_questions
from agent_tools.tools import discover

SHIPPED = Path(__file__).resolve().parents[4] / "evals" / "questions.yaml"
BORDERS = {
    "border:deposit-withdrawal": {"depozit_ozeti", "cekim_ozeti"},
    "border:position-volume": {"pozisyon_dagilimi", "islem_hacmi"},
    "border:balance-deposit": {"musteri_bakiyesi", "depozit_ozeti"},
}


@pytest.fixture(scope="module")
def questions() -> list[Question]:
    return load_questions(SHIPPED).questions


def test_core_is_the_original_27_kinds_in_english_and_turkish(questions: list[Question]) -> None:
    for lang in ("en", "tr"):
        core = [q for q in questions if "core" in q.tags and q.lang == lang]
        assert (sum(q.needs_tool for q in core), sum(not q.needs_tool for q in core)) == (17, 10), lang
    core_ids = {q.id for q in questions if "core" in q.tags}
    assert {i.removesuffix("-en") for i in core_ids if i.endswith("-en")} == {
        i.removesuffix("-tr") for i in core_ids if i.endswith("-tr")
    }  # every English kind has its Turkish twin


def test_every_tool_is_asked_for_in_both_languages(questions: list[Question]) -> None:
    names = {spec.name for spec in discover()}
    for lang in ("en", "tr"):
        assert {t for q in questions if q.lang == lang for t in q.expect} == names, lang


@pytest.mark.parametrize("border", sorted(BORDERS))
def test_each_border_has_near_neighbours_on_both_sides_in_both_languages(
    questions: list[Question], border: str
) -> None:
    tagged = [q for q in questions if border in q.tags]
    for lang in ("en", "tr"):
        sides = Counter(t for q in tagged if q.lang == lang for t in q.expect)
        assert set(sides) == BORDERS[border] and min(sides.values()) >= 2, (border, lang, sides)


def test_lookalikes_need_no_tool(questions: list[Question]) -> None:
    lookalikes = [q for q in questions if "lookalike" in q.tags]
    assert all(not q.needs_tool for q in lookalikes)
    assert Counter(q.lang for q in lookalikes) == {"en": 9, "tr": 9}


def test_expected_tools_and_argument_names_exist(questions: list[Question]) -> None:
    params = {spec.name: set(inspect.signature(spec.fn).parameters) for spec in discover()}
    for q in questions:
        assert set(q.expect + q.allow) <= set(params), q.id
        for tool, specs in q.args.items():
            assert set(specs) <= params[tool], (q.id, tool, set(specs) - params[tool])
