"""The held-out set stays held out: evals/paraphrases.yaml is never tuned on (evals/README.md), so none of its
questions' wording may reach what is tuned, the tools' descriptions (their docstrings) and the agent's prompts.
Four words in a row of a held-out question found there mean someone tuned on it; short common phrases ("how many
lots") are not counted. The tuning set, evals/questions.yaml, is free to shape them."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[4]
TUNED = [*sorted((REPO / "mcp-server/src/agent_tools/tools").glob("*.py")),
         REPO / "services/agent/src/agent/loop/prompt.py",
         REPO / "services/agent/src/agent/loop/constrained.py"]  # fmt: skip
RUN = 4


def words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def runs(text: str) -> set[str]:
    w = words(text)
    return {" ".join(w[i : i + RUN]) for i in range(len(w) - RUN + 1)}


def copied(question: str, tuned: str) -> list[str]:
    return sorted(run for run in runs(question) if f" {run} " in tuned)


def tuned_text() -> str:
    return " " + " ".join(" ".join(words(path.read_text(encoding="utf-8"))) for path in TUNED) + " "


def held_out() -> list[dict[str, str]]:
    return list(yaml.safe_load((REPO / "evals/paraphrases.yaml").read_text(encoding="utf-8"))["questions"])


def test_no_held_out_question_is_written_into_the_descriptions_or_prompts() -> None:
    tuned = tuned_text()
    found = {q["id"]: hits for q in held_out() if (hits := copied(q["text"], tuned))}
    assert found == {}


def test_the_check_sees_a_held_out_question_pasted_into_a_docstring() -> None:
    question = held_out()[0]["text"]
    assert len(words(question)) >= RUN
    assert copied(question, tuned_text() + " ".join(words(f'"""Use it for: {question}"""')) + " ")


def test_the_held_out_set_is_not_in_the_tuning_set() -> None:
    tuning = yaml.safe_load((REPO / "evals/questions.yaml").read_text(encoding="utf-8"))["questions"]
    held = held_out()
    assert len(held) >= 30
    assert {q["id"] for q in held}.isdisjoint(q["id"] for q in tuning)
    assert {" ".join(words(q["text"])) for q in held}.isdisjoint(" ".join(words(q["text"])) for q in tuning)
