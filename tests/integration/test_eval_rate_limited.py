"""agent-eval against an agent that allows 5 chats a minute (RATE_LIMIT_PER_MINUTE=5): every question answered,
the waits on Retry-After reported, and the run titled as the scripted stand-in it ran on, never "qwen3:4b".

The scripted Ollama answers: this tests the harness and the stack, never a model.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.integration.conftest import FakeOllama, McpServer, agent_env
from tests.support.procs import VENV_BIN, free_port, running

QUESTIONS = "version: 1\nquestions:\n" + "".join(
    f'  - {{id: q{n}, text: "What is {n}+{n}?", expect: []}}\n' for n in range(7)
)


def test_a_rate_limited_agent_loses_no_question(fake_ollama: FakeOllama, mcp_server: McpServer, tmp_path: Path) -> None:
    fake_ollama.script(default={"content": "It is a number."})
    port = free_port()
    env = agent_env(fake_ollama.url, mcp_server, port, RATE_LIMIT_PER_MINUTE="5")
    (tmp_path / "questions.yaml").write_text(QUESTIONS)
    with running(["agent-api"], env=env, ready_url=f"http://127.0.0.1:{port}/healthz"):
        done = subprocess.run(
            [str(VENV_BIN / "agent-eval"), "run", "--base-url", f"http://127.0.0.1:{port}/v1",
             "--questions", "questions.yaml", "--out", "out"],
            cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    run = json.loads((tmp_path / "out/qwen3_4b.json").read_text())
    assert run["scores"]["unanswered"] == 0 and [r["error"] for r in run["records"]] == [None] * 7
    waits = run["meta"]["refusal_waits"]
    assert waits["waits"] >= 1 and waits["seconds"] > 0  # the sixth question waited for the window to move
    assert "waited" in done.stderr  # the progress line says which question waited
    report = (tmp_path / "out/qwen3_4b.md").read_text()
    assert report.startswith("# agent-eval — scripted model, not a real LLM (served as qwen3:4b)")
    assert f"Waited for Retry-After: {waits['waits']} times" in report and "Not answered" in report
    assert "scripted model, not a real LLM" in done.stdout and "not answered 0" in done.stdout
