"""Constrained tool calling on a model that really chooses tools: llama-server + Qwen2.5-Coder-1.5B-Instruct (the
default of scripts/llama-server) behind agent-api (direct, OpenAI protocol, TOOL_CALLING=constrained), eleven
questions of the shipped set, English and Turkish, seven that need a tool (the clock among them) and four that need
none, asked through agent-eval's own runner and scored by its own scoring.

What is asserted is what constrained decoding guarantees (every decision a real, offered tool with schema-valid
arguments, or an answer; every answer plain text, never JSON or a call written out) and a floor on the right tool
that the measured rate supports (docs/evaluation.md: FLOOR below, with the run it comes from). The model runs at
temperature 0, so its choices do not depend on how loaded the machine is; only its speed does, and nothing here
is timed. The full sets, both modes, are `scripts/eval-real-engine` (docs/evaluation.md)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.eval import decisions
from agent.eval.questions import load_questions
from agent.eval.records import Run
from agent.eval.runner import AgentClient, run_model
from tests.support.engine import built
from tests.support.procs import REPO
from tests.support.real_engine import agent_stack, engine, served_name

MODEL = "qwen-1.5b"
SUBSET = ["deposits-today-en", "withdrawals-today-tr", "positions-gold-en", "balance-id-tr", "kyc-pending-en",
          "note-save-tr", "time-now-tr", "math-2plus2-en", "greeting-en", "capital-tr", "http-404-en"]  # fmt: skip
NEEDS_TOOL = 7
# Eleven questions on one CPU thread: ~13 min on this 2-core box (the 3.2k-token tool catalogue alone ~5 min cold).
pytestmark = pytest.mark.timeout(3600)
# Right tool on 10 of 11 measured here ("Fransa'nın başkenti neresi?" calls the clock; docs/evaluation.md, "CI's
# real-engine test"); the floor leaves two questions of room for a llama.cpp build whose arithmetic rounds
# differently on another CPU.
FLOOR = 8


@pytest.fixture(scope="module")
def run() -> Iterator[Run]:
    built(MODEL)
    name = served_name(MODEL)
    with (
        engine(ctx=8192, n_predict=96, model=MODEL) as url,
        agent_stack(url, "constrained", model_name=name, ROUND_TIMEOUT_SECONDS="1800") as api,
    ):
        questions = load_questions(Path(REPO / "evals/questions.yaml")).select(SUBSET)
        client = AgentClient(api, timeout=1800)
        try:
            yield run_model(client, name, questions)
        finally:
            client.close()


def detail(run: Run) -> list[tuple[str, list[str], str]]:
    return [(r.id, r.called(), r.answer[:100]) for r in run.records]


def test_the_questions_are_the_ones_chosen(run: Run) -> None:
    assert sorted(r.id for r in run.records) == sorted(SUBSET)  # asked in the file's order
    assert sum(r.needs_tool for r in run.records) == NEEDS_TOOL
    assert run.meta["tool_calling"] == "constrained"
    assert [r.error for r in run.records] == [None] * len(SUBSET)


def test_every_decision_is_valid_and_every_answer_is_plain_text(run: Run) -> None:
    scores = decisions.score(run.records)
    validity, plain = scores["validity"], scores["plain_text"]
    assert validity["correct"] == validity["total"] >= len(SUBSET), detail(run)
    assert plain["correct"] == plain["total"] == len(SUBSET), detail(run)
    assert all(c.outcome not in decisions.INVALID_OUTCOMES for r in run.records for c in r.calls)


def test_the_model_chooses_the_right_tool_at_the_measured_rate(run: Run) -> None:
    right = sum(bool(r.selection_ok) for r in run.records)
    assert right >= FLOOR, detail(run)
    # Both kinds of question carry the floor: a model that never calls a tool, or always does, fails it.
    assert sum(bool(r.selection_ok) for r in run.records if r.needs_tool) >= NEEDS_TOOL - (len(SUBSET) - FLOOR)
    assert sum(bool(r.selection_ok) for r in run.records if not r.needs_tool) >= len(SUBSET) - NEEDS_TOOL - (
        len(SUBSET) - FLOOR
    )
