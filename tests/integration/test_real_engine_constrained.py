"""Constrained tool calling on a real engine: llama-server + SmolLM2-135M behind agent-api (direct, OpenAI
protocol, TOOL_CALLING=constrained), ten questions of the shipped set asked through agent-eval's own runner.

The model is tiny and its choices are poor; the claim is the construction's: every decision it makes is a real,
offered tool with schema-valid arguments, or an answer (10/10 questions, every decision valid). The full run, both
ways, is `scripts/eval-real-engine` (docs/evaluation.md)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.eval import decisions
from agent.eval.questions import load_questions
from agent.eval.runner import AgentClient, run_model
from tests.support.procs import REPO
from tests.support.real_engine import MODEL, agent_stack, engine, engine_paths

SUBSET = ["deposits-today-en", "withdrawals-today-tr", "positions-gold-en", "balance-id-tr", "kyc-pending-en",
          "note-save-tr", "files-find-en", "math-2plus2-en", "greeting-en", "volume-eurusd-tr"]  # fmt: skip


@pytest.fixture(scope="module")
def constrained_api() -> Iterator[str]:
    if engine_paths() is None:
        why = "llama-server is not built: run scripts/llama-server (.ci/run does)"
        if os.environ.get("REQUIRE_E2E") == "1":
            pytest.fail(why)
        pytest.skip(why)
    with engine(ctx=8192, n_predict=32) as url, agent_stack(url, "constrained") as api:
        yield api


def test_ten_constrained_decisions_on_a_real_engine_are_all_valid(constrained_api: str) -> None:
    questions = load_questions(Path(REPO / "evals/questions.yaml")).select(SUBSET)
    assert len(questions.questions) == 10
    client = AgentClient(constrained_api, timeout=300)
    try:
        run = run_model(client, MODEL, questions)
    finally:
        client.close()
    assert run.meta["tool_calling"] == "constrained"
    assert [r.error for r in run.records] == [None] * 10
    validity = decisions.score(run.records)["validity"]
    assert validity["correct"] == validity["total"] >= 10, [(r.id, r.calls, r.answer[:80]) for r in run.records]
    assert all(c.outcome not in decisions.INVALID_OUTCOMES for r in run.records for c in r.calls)
