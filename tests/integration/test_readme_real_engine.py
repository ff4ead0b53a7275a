"""The README's "no Ollama?" commands, as written: `scripts/llama-server serve` (Qwen2.5-Coder-1.5B, its default),
then `local-agent` with MODEL_PROTOCOL=openai and MODEL_URL, then the curl; the answer must come from the real
engine through local-agent's tool loop (the engine's own token counter proves who answered) and from the right
tool: the deposits question calls `depozit_ozeti`, and the answer is prose, not the call written out.

Only the environment is the test's: free ports instead of 8080/8000 (substituted in the commands), a private
state directory (XDG_DATA_HOME), short answers and a generous round deadline for a loaded 2-core machine
(LLAMA_N_PREDICT, ROUND_TIMEOUT_SECONDS). Never skipped under REQUIRE_E2E=1; a failure shows the engine's log.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agent.eval import decisions
from tests.support.engine import Engine, built
from tests.support.procs import REPO, VENV_BIN, Proc, free_port, running

MARKER = "<!-- tests/integration/test_readme_real_engine.py runs these commands -->"
MODEL = "qwen2.5-coder:1.5b"  # what scripts/llama-server serves by default, and the README names


def readme_commands() -> list[str]:
    """The commands of the README block after MARKER: continuation lines joined, comment lines dropped."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    block = text.split(MARKER, 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    joined = re.sub(r"\\\n\s*", "", block)
    return [line for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def test_the_readme_block_is_the_three_steps() -> None:
    serve, agent, ask = readme_commands()
    assert serve.startswith("scripts/llama-server serve 8080 &")
    assert agent.startswith("MODEL_PROTOCOL=openai MODEL_URL=http://127.0.0.1:8080 ") and "local-agent" in agent
    assert ask.startswith("curl -s localhost:8000/v1/chat/completions") and "deposited today" in ask
    assert f"MODEL_NAME={MODEL} " in agent and f'"model":"{MODEL}"' in ask
    # natively it called a tool on 8 of 10 English questions needing none, 7 the clock (docs/evaluation.md)
    assert " TOOL_CALLING=constrained " in agent


@dataclass
class Running:
    engine: Engine
    agent: Proc
    port: int
    home: Path


@pytest.fixture
def readme_stack(tmp_path: Path) -> Iterator[Running]:
    built("qwen-1.5b")
    serve, agent, _ = readme_commands()
    engine_port, api_port = free_port(), free_port()
    url = f"http://127.0.0.1:{engine_port}"
    serve = serve.replace("8080", str(engine_port)).split(" &", 1)[0]
    env = {"XDG_DATA_HOME": str(tmp_path), "AGENT_PORT": str(api_port), "LLAMA_N_PREDICT": "128",
           "ROUND_TIMEOUT_SECONDS": "1800", "PATH": f"{VENV_BIN}:{os.environ['PATH']}"}  # fmt: skip
    with running(["bash", "-c", serve], env=env, ready_url=f"{url}/health", timeout=120) as engine:
        agent = agent.replace("8080", str(engine_port))
        with running(["bash", "-c", agent], env=env, ready_url=f"http://127.0.0.1:{api_port}/healthz") as proc:
            yield Running(Engine(url, engine), proc, api_port, tmp_path / "local-agent")


def ask_readme(stack: Running, question: str | None = None) -> dict[str, object]:
    """The README's curl (its question, or `question` in its place) against the stack; the parsed reply."""
    ask = readme_commands()[2].replace("localhost:8000", f"localhost:{stack.port}")
    if question is not None:
        ask = ask.replace("how many dollars were deposited today?", question)
    key = (stack.home / "admin.key").read_text().strip()
    done = subprocess.run(["bash", "-c", ask], env={**os.environ, "KEY": key}, capture_output=True, text=True,
                          timeout=2400, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    answer: dict[str, object] = json.loads(done.stdout)
    assert "error" not in answer, answer
    return answer


@pytest.mark.timeout(3000)  # a 4k-token prompt twice on the CPU: ~2 min on a quiet box, 15 on one this loaded
def test_readme_commands_answer_through_local_agent_on_the_real_engine(readme_stack: Running) -> None:
    before = readme_stack.engine.predicted_tokens()
    answer: Any = ask_readme(readme_stack)
    text = answer["choices"][0]["message"]["content"]
    assert text.strip() and not text.startswith("local-agent is not ready"), text
    assert answer["model"] == MODEL and answer["local_agent"]["rounds"] >= 1  # through the tool loop
    assert answer["local_agent"]["tools_used"] == ["depozit_ozeti"], answer["local_agent"]
    assert decisions.plain_text(text) and not decisions.call_as_text(text), text
    generated = answer["usage"]["completion_tokens"]
    assert generated > 0 and readme_stack.engine.predicted_tokens() - before >= generated  # by the real engine
    log = readme_stack.agent.output()
    assert "[ok] the OpenAI-protocol model server answers at" in log and f"[ok] model {MODEL} is served" in log

    greeting: Any = ask_readme(readme_stack, "Hello, how are you?")  # natively: the clock tool (evals: greeting-en)
    assert greeting["local_agent"]["tools_used"] == [], greeting["local_agent"]
    assert decisions.plain_text(greeting["choices"][0]["message"]["content"])
