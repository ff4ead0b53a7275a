"""Tool retrieval end to end: the scripted model is offered the top k of the caller's tools plus the kept ones,
never a tool outside the role, the same set in every round; the trace and the audit record say which and why.

The scripted Ollama's replies prove the plumbing, never a model's accuracy."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from agent_contract.policy import shipped_policy_text
from tests.integration.conftest import FakeOllama, McpServer, agent_env
from tests.support.contract import TOOL_NAMES
from tests.support.procs import VENV_BIN, free_port, running

OPERATIONS = set(yaml.safe_load(shipped_policy_text())["roles"]["operations"])


class Agent:
    def __init__(self, url: str, audit_dir: Path) -> None:
        self.url, self.audit_dir = url, audit_dir

    def ask(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        body = {"model": "qwen3:4b", "messages": messages}
        resp = httpx.post(f"{self.url}/v1/chat/completions", json=body, timeout=30)
        resp.raise_for_status()
        return dict(resp.json())

    def last_audit(self) -> dict[str, Any]:
        return dict(json.loads((self.audit_dir / "audit.jsonl").read_text().splitlines()[-1]))


@pytest.fixture(scope="module")
def agents(
    fake_ollama: FakeOllama, mcp_server: McpServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Agent]]:
    """An admin agent with lexical retrieval and the default k=4, and an `operations` agent with k=2."""
    ports = free_port(), free_port()
    dirs = tmp_path_factory.mktemp("audit-admin"), tmp_path_factory.mktemp("audit-ops")
    on = {"TOOL_RETRIEVAL": "lexical"}
    admin = agent_env(fake_ollama.url, mcp_server, ports[0], AUDIT_DIR=str(dirs[0]), **on)
    ops = agent_env(
        fake_ollama.url, mcp_server, ports[1], AUDIT_DIR=str(dirs[1]), ANONYMOUS_ROLE="operations", TOOL_TOP_K="2", **on
    )
    with (
        running(["agent-api"], env=admin, ready_url=f"http://127.0.0.1:{ports[0]}/healthz"),
        running(["agent-api"], env=ops, ready_url=f"http://127.0.0.1:{ports[1]}/healthz"),
    ):
        yield {
            "admin": Agent(f"http://127.0.0.1:{ports[0]}", dirs[0]),
            "operations": Agent(f"http://127.0.0.1:{ports[1]}", dirs[1]),
        }


def names(request: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools") or []]


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def test_top_k_offered_in_every_round_and_recorded_in_trace_and_audit(
    agents: dict[str, Agent], ollama: FakeOllama
) -> None:
    ollama.script(
        rules=[
            {"when": {"last_role": "user"}, "reply": {"tool_calls": [{"name": "depozit_ozeti", "arguments": {}}]}},
            {"when": {"last_role": "tool"}, "reply": {"content": "Deposits are in."}},
        ]
    )
    reply = agents["admin"].ask(user("How many dollars were deposited today?"))
    first, second = ollama.requests()
    assert len(names(first)) == 4 and names(first)[0] == "depozit_ozeti"
    assert names(second) == names(first)  # later rounds keep the first round's set
    retrieval = reply["local_agent"]["retrieval"]
    assert retrieval["mode"] == "lexical" and retrieval["top_k"] == 4 and retrieval["allowed"] == len(TOOL_NAMES)
    assert [o["name"] for o in retrieval["offered"]] == names(first)
    assert retrieval["offered"][0]["why"] == "rank" and retrieval["offered"][0]["rank"] == 1
    assert agents["admin"].last_audit()["tools_offered"] == retrieval["offered"]


def test_named_and_earlier_tools_are_kept_but_never_outside_the_role(
    agents: dict[str, Agent], ollama: FakeOllama
) -> None:
    ollama.script(default={"content": "ok"})
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "What is the trading volume on EURUSD?"},
        {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "islem_hacmi", "arguments": {}}}]},
        {"role": "tool", "content": "{}", "tool_name": "islem_hacmi"},
        {"role": "assistant", "content": "1.5 lots."},
        # musteri_bakiyesi is named but the operations role may not use it; kyc_ozeti is named and allowed
        {"role": "user", "content": "Saat kaç? Also run kyc_ozeti and musteri_bakiyesi for C1001."},
    ]
    reply = agents["operations"].ask(history)
    (request,) = ollama.requests()
    offered = names(request)
    assert set(offered) <= OPERATIONS and "musteri_bakiyesi" not in offered
    entries = reply["local_agent"]["retrieval"]["offered"]
    why = {o["name"]: o["why"] for o in entries}
    assert [o["rank"] for o in entries if "rank" in o] == [1, 2]  # TOOL_TOP_K=2 ranked, the rest kept
    assert why["kyc_ozeti"] == "named" and why["islem_hacmi"] == "called earlier"
    assert "sistem_bilgisi" in offered and len(offered) == len(why)


QUESTIONS = """
version: 1
questions:
  - {id: date-but-files, lang: en, text: "What is today's date?", expect: [dosya_ara]}
  - {id: deposits, lang: en, text: "How many dollars were deposited today?", expect: [depozit_ozeti]}
  - {id: notes-tr, lang: tr, text: "Notlarımı göster.", expect: [notlari_getir]}
"""


def test_agent_eval_scores_a_tool_never_offered_as_retrieval_missed(
    agents: dict[str, Agent], ollama: FakeOllama, tmp_path: Path
) -> None:
    """The first question's expected tool is never among the top 4 for its words: retrieval, not the model,
    missed it. The second is offered but the script picks the neighbour: the model's mistake."""
    ollama.script(
        rules=[
            {
                "when": {"user_contains": "deposited", "last_role": "user"},
                "reply": {"tool_calls": [{"name": "cekim_ozeti", "arguments": {}}]},
            },
            {
                "when": {"user_contains": "Notlar", "last_role": "user"},
                "reply": {"tool_calls": [{"name": "notlari_getir", "arguments": {}}]},
            },
        ],
        default={"content": "Done."},
    )
    (tmp_path / "q.yaml").write_text(QUESTIONS, encoding="utf-8")
    command = [
        str(VENV_BIN / "agent-eval"),
        "run",
        "--base-url",
        f"{agents['admin'].url}/v1",
        "--questions",
        str(tmp_path / "q.yaml"),
        "--out",
        str(tmp_path / "out"),
        "--quiet",
    ]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    run = json.loads((tmp_path / "out" / "qwen3_4b.json").read_text(encoding="utf-8"))
    verdicts = {r["id"]: r["verdict"] for r in run["records"]}
    assert verdicts == {"date-but-files": "retrieval_missed", "deposits": "wrong_tool", "notes-tr": "correct"}
    r = run["scores"]["retrieval"]
    assert r["recall"] == {"correct": 2, "total": 3, "rate": 0.6667}
    assert r["by_lang"]["en"]["recall"]["rate"] == 0.5 and r["by_lang"]["tr"]["recall"]["rate"] == 1.0
    assert r["model_choice"] == {"correct": 1, "total": 2, "rate": 0.5}
    report = (tmp_path / "out" / "qwen3_4b.md").read_text(encoding="utf-8")
    assert "| date-but-files (#1) | dosya_ara |" in report
