"""The grounding check end to end: scripted model answers after a real MCP tool call; the trace, the metric, the
audit record and the visible warning (or the withheld answer) must say exactly which figure was not found."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.conftest import FakeOllama, McpServer, agent_env
from tests.support.procs import free_port, running

REPORT = "Deposits on 2026-12-03: 42 payments, total 12345.67 USD, paid by card 10000.00 USD.\n"
READ_RULE = {
    "when": {"user_contains": "deposit file", "last_role": "user"},
    "reply": {"tool_calls": [{"name": "dosya_oku", "arguments": {"path": "deposits.txt"}}]},
}
FOOTER = "\n\n---\nTools used: dosya_oku"


class Agent:
    def __init__(self, url: str, audit_dir: Path) -> None:
        self.url, self.audit_dir = url, audit_dir

    def ask(self, question: str, **extra: Any) -> dict[str, Any]:
        body = {"model": "qwen3:4b", "messages": [{"role": "user", "content": question}], **extra}
        resp = httpx.post(f"{self.url}/v1/chat/completions", json=body, timeout=30)
        resp.raise_for_status()
        return dict(resp.json())

    def stream(self, question: str) -> list[str]:
        body = {"model": "qwen3:4b", "stream": True, "messages": [{"role": "user", "content": question}]}
        with httpx.stream("POST", f"{self.url}/v1/chat/completions", json=body, timeout=30) as resp:
            lines = [line[6:] for line in resp.iter_lines() if line.startswith("data: {")]
        return [c["choices"][0]["delta"].get("content") or "" for c in map(json.loads, lines) if c["choices"]]

    def counter(self, name: str, label: str) -> float:
        text = httpx.get(f"{self.url}/metrics", timeout=10).text
        found = re.search(rf'^{name}{{[^}}]*="{label}"}} (\S+)$', text, re.M)
        return float(found.group(1)) if found else 0.0

    def last_audit(self) -> dict[str, Any]:
        lines = (self.audit_dir / "audit.jsonl").read_text().splitlines()
        return dict(json.loads(lines[-1]))


@pytest.fixture(scope="module")
def agents(
    fake_ollama: FakeOllama, mcp_server: McpServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Agent]]:
    """One agent-api with the default mode (warn) and one with GROUNDING_MODE=withhold, each with its audit log."""
    (mcp_server.files_root / "deposits.txt").write_text(REPORT)
    warn_port, withhold_port = free_port(), free_port()
    warn_dir, withhold_dir = tmp_path_factory.mktemp("audit-warn"), tmp_path_factory.mktemp("audit-withhold")
    warn_env = agent_env(fake_ollama.url, mcp_server, warn_port, AUDIT_DIR=str(warn_dir))
    withhold_env = agent_env(
        fake_ollama.url, mcp_server, withhold_port, AUDIT_DIR=str(withhold_dir), GROUNDING_MODE="withhold"
    )
    with (
        running(["agent-api"], env=warn_env, ready_url=f"http://127.0.0.1:{warn_port}/healthz"),
        running(["agent-api"], env=withhold_env, ready_url=f"http://127.0.0.1:{withhold_port}/healthz"),
    ):
        yield {
            "warn": Agent(f"http://127.0.0.1:{warn_port}", warn_dir),
            "withhold": Agent(f"http://127.0.0.1:{withhold_port}", withhold_dir),
        }


def answer_after_tool(ollama: FakeOllama, content: str) -> None:
    ollama.script(rules=[READ_RULE, {"when": {"last_role": "tool"}, "reply": {"content": content}}])


def text_and_trace(reply: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return reply["choices"][0]["message"]["content"], reply["local_agent"]["grounding"]


@pytest.mark.parametrize(
    "answer",
    [
        "On 3 December 2026 there were 42 deposits totalling $12,345.67, 81% of it by card.",
        "3 Aralık 2026: 42 yatırım, toplam 12.345,67 USD; kartla %81, yaklaşık 12,3 bin dolar.",
        "According to the tool: {tool_result}",
    ],
    ids=["reformatted EN", "reformatted TR", "copied"],
)
def test_a_correct_answer_is_never_flagged(agents: dict[str, Agent], ollama: FakeOllama, answer: str) -> None:
    agent = agents["warn"]
    answer_after_tool(ollama, answer)
    before = agent.counter("agent_grounding_checks_total", "grounded")
    text, trace = text_and_trace(agent.ask("Read the deposit file: how much was deposited?"))
    assert "⚠" not in text and text.endswith(FOOTER)
    assert trace["status"] == "grounded" and trace["ungrounded"] == [] and trace["figures"] >= 3
    assert agent.counter("agent_grounding_checks_total", "grounded") == before + 1
    assert agent.last_audit()["grounding"] == {"status": "grounded", "figures": trace["figures"], "ungrounded": []}


@pytest.mark.parametrize(
    ("answer", "figure", "kind", "nearest"),
    [
        ("42 deposits, total $12,345.67, and 125 KYC applications are pending.", "125", "count", "(dosya_oku)"),
        ("42 deposits totalling $1,234.67.", "$1,234.67", "amount", "(dosya_oku)"),
        ("42 yatırım, toplam 12.354,67 USD.", "12.354,67 USD", "amount", "12345.67 (dosya_oku)"),
    ],
    ids=["invented", "digit dropped", "reformatted wrongly"],
)
def test_an_ungrounded_figure_is_named_everywhere(
    agents: dict[str, Agent], ollama: FakeOllama, answer: str, figure: str, kind: str, nearest: str
) -> None:
    agent = agents["warn"]
    answer_after_tool(ollama, answer)
    before = agent.counter("agent_ungrounded_figures_total", kind)
    text, trace = text_and_trace(agent.ask("Read the deposit file: how much was deposited?"))
    warning = text.removesuffix(FOOTER).rsplit("\n\n", 1)[1]
    assert text.startswith(answer) and text.endswith(FOOTER)
    assert figure in warning and warning.startswith("⚠ Not found in the tool results:")
    assert trace["status"] == "ungrounded" and trace["mode"] == "warn" and trace["action"] == "warned"
    assert [(u["text"], u["kind"]) for u in trace["ungrounded"]] == [(figure, kind)]
    assert nearest in trace["ungrounded"][0]["nearest"]  # the closest tool figure, shown beside it
    assert agent.counter("agent_ungrounded_figures_total", kind) == before + 1
    assert agent.last_audit()["grounding"]["ungrounded"] == [figure]


def test_a_dropped_figure_and_a_figure_without_a_tool_are_their_own_signals(
    agents: dict[str, Agent], ollama: FakeOllama
) -> None:
    agent = agents["warn"]
    answer_after_tool(ollama, "Deposits were made today.")
    text, trace = text_and_trace(agent.ask("Read the deposit file: how much was deposited?"))
    assert trace["status"] == "figure_dropped" and "⚠ The answer gives no figure" in text
    ollama.script(default={"content": "There are currently 125 KYC applications pending."})
    text, trace = text_and_trace(agent.ask("How many KYC applications are pending?"))
    assert trace["status"] == "no_tool_call" and [u["text"] for u in trace["ungrounded"]] == ["125"]
    assert text.endswith("\n\n⚠ No company tool was called: 125 did not come from company data — verify before use.")
    assert agent.last_audit()["grounding"] == {"status": "no_tool_call", "figures": 1, "ungrounded": ["125"]}


def test_streaming_warns_after_the_answer_and_before_the_footer(agents: dict[str, Agent], ollama: FakeOllama) -> None:
    answer_after_tool(ollama, "Bugün 42 yatırım, toplam 99.999,00 USD.")
    chunks = agents["warn"].stream("Read the deposit file: bugün ne kadar yatırıldı?")
    assert "".join(chunks).endswith(
        "USD.\n\n⚠ Araç sonuçlarında bulunamadı: 99.999,00 USD — kullanmadan önce doğrulayın." + FOOTER
    )
    assert len(chunks) > 3  # the answer itself still streamed token by token


def test_withhold_replaces_the_answer_with_the_tool_results(agents: dict[str, Agent], ollama: FakeOllama) -> None:
    agent = agents["withhold"]
    answer_after_tool(ollama, "42 deposits, and 125 KYC applications are pending.")
    text, trace = text_and_trace(agent.ask("Read the deposit file: how much was deposited?"))
    assert "125 KYC" not in text and trace["action"] == "withheld"
    assert text.startswith("The answer was withheld: it contained figures not found in the tool results (125).")
    assert "- dosya_oku: content: " + REPORT.strip() in text and text.endswith(FOOTER)
    assert agent.last_audit()["grounding"]["ungrounded"] == ["125"]
    chunks = agent.stream("Read the deposit file: how much was deposited?")
    assert not any("125 KYC" in c for c in chunks) and "".join(chunks) == text  # nothing unchecked streamed


def test_withhold_streams_a_grounded_answer_once_checked(agents: dict[str, Agent], ollama: FakeOllama) -> None:
    answer = "42 deposits totalling $12,345.67."
    answer_after_tool(ollama, answer)
    chunks = agents["withhold"].stream("Read the deposit file: how much was deposited?")
    assert chunks[:2] == ["", answer] and "".join(chunks) == answer + FOOTER
