"""The shipped question set through the real agent: a scripted model that always does the right thing
scores 100 %, so every expectation and argument matcher in evals/questions.yaml can be met.

This checks the set and the harness, not a model (the scripted Ollama's answers are no model accuracy).
"""

from __future__ import annotations

import datetime as dt
import json
import re
import subprocess
from pathlib import Path
from typing import Any

from agent.eval.matchers import matches
from agent.eval.questions import Question, load_questions
from tests.integration.conftest import AgentApi, FakeOllama
from tests.support.procs import REPO, VENV_BIN

SHIPPED = REPO / "evals" / "questions.yaml"
WORDS = {"today": "today", "yesterday": "yesterday"}


def sample(spec: Any) -> Any:
    """A value a well-behaved model would pass for this matcher."""
    if isinstance(spec, list):
        return sample(next(s for s in spec if s is not None))
    if isinstance(spec, dict):
        key, wanted = next(iter(spec.items()))
        if key == "date":
            return WORDS.get(wanted, wanted)
        if key == "regex":  # the set's patterns are literals with optional spaces/dashes: drop those parts
            return re.sub(r"\\s\*|-\?|[\^$]", "", wanted).replace("\\", "")
        return wanted
    return spec


def right_rule(q: Question) -> dict[str, Any]:
    calls = []
    for tool in q.expect:
        arguments = {name: sample(spec) for name, spec in q.args.get(tool, {}).items()}
        assert all(matches(spec, arguments[name], dt.date.today()) for name, spec in q.args.get(tool, {}).items()), q.id
        calls.append({"name": tool, "arguments": arguments})
    return {"when": {"user_contains": q.text, "last_role": "user"}, "reply": {"tool_calls": calls}}


def test_a_model_that_always_picks_right_scores_everything(
    agent_api: AgentApi, ollama: FakeOllama, tmp_path: Path
) -> None:
    questions = load_questions(SHIPPED).questions
    ollama.script(rules=[right_rule(q) for q in questions if q.needs_tool])
    proc = subprocess.run(
        [
            str(VENV_BIN / "agent-eval"),
            "run",
            "--base-url",
            f"{agent_api.url}/v1",
            "--questions",
            str(SHIPPED),
            "--out",
            str(tmp_path),
            "--quiet",
            "--fail-under",
            "1.0",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    scores = json.loads((tmp_path / "qwen3_4b.json").read_text(encoding="utf-8"))["scores"]
    total = len(questions)
    assert scores["strict_accuracy"] == {"correct": total, "total": total, "rate": 1.0}
    assert scores["arguments"]["correct"] == scores["arguments"]["total"] == sum(bool(q.args) for q in questions)
    assert all(cols == {row: cols.get(row, 0)} for row, cols in scores["confusion"].items())  # diagonal only
