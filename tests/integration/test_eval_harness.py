"""agent-eval against the real agent-api + MCP server, with the scripted Ollama making known mistakes.

These runs test the harness (does every score count exactly the mistakes we scripted?), never a model:
the scripted Ollama's answers are not model accuracy.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from agent.loop.prompt import SYSTEM_PROMPT
from tests.integration.conftest import AgentApi, FakeOllama, McpServer
from tests.support.contract import TOOL_NAMES
from tests.support.procs import VENV_BIN

QUESTIONS = """
version: 1
questions:
  - {id: time, text: "What time is it?", expect: [sistem_bilgisi], tags: [core]}
  - id: deposits
    text: "How many dollars were deposited yesterday?"
    expect: [depozit_ozeti]
    args: {depozit_ozeti: {start_date: {date: yesterday}}}
    tags: [core, border]
  - {id: two-plus-two, text: "What is 2+2?", expect: [], tags: [core]}
  - id: note
    text: "Take a note: buy milk tomorrow"
    expect: [not_kaydet]
    args: {not_kaydet: {text: {contains: milk}}}
  - id: volume
    text: "What is the trading volume on EURUSD today?"
    expect: [islem_hacmi]
    args: {islem_hacmi: {symbol: EURUSD}}
    tags: [border]
  - {id: listcomp, text: "What is a list comprehension in Python?", expect: [], lang: en}
  - id: balance
    text: "What is the balance of customer C1001?"
    expect: [musteri_bakiyesi]
    args: {musteri_bakiyesi: {customer: C1001}}
  - id: positions
    text: "Show the open positions on gold."
    expect: [pozisyon_dagilimi]
    args: {pozisyon_dagilimi: {symbol: [XAUUSD, gold]}}
    tags: [border]
"""


def call(marker: str, tool: str, **arguments: Any) -> dict[str, Any]:
    return {
        "when": {"user_contains": marker, "last_role": "user"},
        "reply": {"tool_calls": [{"name": tool, "arguments": arguments}]},
    }


def say(marker: str, text: str) -> dict[str, Any]:
    return {"when": {"user_contains": marker, "last_role": "user"}, "reply": {"content": text}}


# Run A: one wrong tool, one spurious call, one missed call, one wrong argument; the other four right.
RULES_A = [
    call("what time", "sistem_bilgisi"),
    call("deposited yesterday", "cekim_ozeti", start_date="yesterday"),  # wrong tool
    call("2+2", "notlari_getir"),  # spurious call on a no-tool question
    say("take a note", "Sure, I will remember that."),  # missed call
    call("volume on eurusd", "islem_hacmi", symbol="GBPUSD"),  # wrong argument
    say("list comprehension", "A list comprehension builds a list from an iterable."),
    call("balance of customer", "musteri_bakiyesi", customer="C1001"),
    call("positions on gold", "pozisyon_dagilimi", symbol="XAUUSD"),
]
# Run B: deposits and volume fixed, positions broken (wrong tool); everything else as in A.
RULES_B = [
    call("deposited yesterday", "depozit_ozeti", start_date="yesterday"),
    call("volume on eurusd", "islem_hacmi", symbol="EURUSD"),
    call("positions on gold", "islem_hacmi", symbol="XAUUSD"),
    *RULES_A,
]


def agent_eval(*args: str, cwd: Path, status: int = 0) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [str(VENV_BIN / "agent-eval"), *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == status, proc.stderr + proc.stdout
    return proc


def run_eval(api: AgentApi, tmp: Path, out: str, *extra: str, status: int = 0) -> subprocess.CompletedProcess[str]:
    questions = tmp / "questions.yaml"
    questions.write_text(QUESTIONS, encoding="utf-8")
    return agent_eval(
        "run",
        "--base-url",
        f"{api.url}/v1",
        "--questions",
        str(questions),
        "--out",
        str(tmp / out),
        *extra,
        cwd=tmp,
        status=status,
    )


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


@pytest.fixture
def run_a(agent_api: AgentApi, ollama: FakeOllama, tmp_path: Path) -> dict[str, Any]:
    ollama.script(rules=RULES_A)
    proc = run_eval(agent_api, tmp_path, "a")
    assert "[8/8]" in proc.stderr  # progress lines while it runs
    return load(tmp_path / "a" / "qwen3_4b.json")


def test_scores_count_exactly_the_scripted_mistakes(run_a: dict[str, Any]) -> None:
    s = run_a["scores"]
    assert s["accuracy"] == {"correct": 5, "total": 8, "rate": 0.625}
    assert s["strict_accuracy"] == {"correct": 4, "total": 8, "rate": 0.5}
    assert s["tool_needed"] == {"correct": 4, "total": 6, "rate": 0.6667}
    assert s["no_tool"] == {"correct": 1, "total": 2, "rate": 0.5}
    assert s["arguments"] == {"correct": 2, "total": 3, "rate": 0.6667}
    assert s["verdicts"] == {
        "correct": 4,
        "wrong_tool": 1,
        "missed_call": 1,
        "spurious_call": 1,
        "extra_call": 0,
        "wrong_arguments": 1,
        "retrieval_missed": 0,
        "request_failed": 0,
    }
    verdicts = {r["id"]: r["verdict"] for r in run_a["records"]}
    assert verdicts == {
        "time": "correct",
        "deposits": "wrong_tool",
        "two-plus-two": "spurious_call",
        "note": "missed_call",
        "volume": "wrong_arguments",
        "listcomp": "correct",
        "balance": "correct",
        "positions": "correct",
    }


def test_confusion_matrix_and_per_tool_scores(run_a: dict[str, Any]) -> None:
    s = run_a["scores"]
    assert s["confusion"] == {
        "(none)": {"(none)": 1, "notlari_getir": 1},
        "depozit_ozeti": {"cekim_ozeti": 1},
        "islem_hacmi": {"islem_hacmi": 1},
        "musteri_bakiyesi": {"musteri_bakiyesi": 1},
        "not_kaydet": {"(none)": 1},
        "pozisyon_dagilimi": {"pozisyon_dagilimi": 1},
        "sistem_bilgisi": {"sistem_bilgisi": 1},
    }
    per = s["per_tool"]
    assert per["cekim_ozeti"] | {} == {"tp": 0, "fp": 1, "fn": 0, "support": 0, "precision": 0.0, "recall": None}
    assert per["depozit_ozeti"] == {"tp": 0, "fp": 0, "fn": 1, "support": 1, "precision": None, "recall": 0.0}
    assert (per["notlari_getir"]["precision"], per["not_kaydet"]["recall"]) == (0.0, 0.0)
    assert (per["(none)"]["precision"], per["(none)"]["recall"]) == (0.5, 0.5)
    assert per["sistem_bilgisi"]["precision"] == per["sistem_bilgisi"]["recall"] == 1.0
    assert s["by_tag"]["border"] == {"correct": 2, "total": 3, "rate": 0.6667}


def test_records_come_from_the_trace_with_run_facts(run_a: dict[str, Any]) -> None:
    records = {r["id"]: r for r in run_a["records"]}
    assert records["volume"]["calls"] == [
        {"name": "islem_hacmi", "arguments": {"symbol": "GBPUSD"}, "outcome": "ok", "round": 1}
    ]
    assert records["volume"]["arg_problems"] == ["islem_hacmi.symbol: expected EURUSD, got 'GBPUSD'"]
    assert records["time"]["answer"].endswith("Tools used: sistem_bilgisi")
    assert (records["time"]["rounds"], records["note"]["rounds"]) == (2, 1)
    assert all(r["latency_s"] > 0 and r["error"] is None for r in records.values())
    s = run_a["scores"]
    assert s["rounds"]["mean"] == 1.75 and s["rounds"]["histogram"] == {"1": 2, "2": 6}
    assert s["latency_s"]["p50"] is not None and s["latency_s"]["p95"] >= s["latency_s"]["p50"]
    meta = run_a["meta"]
    assert meta["model"] == "qwen3:4b" and meta["ollama_version"] == "0.33.0-fake"
    assert meta["system_prompt_sha256"] == hashlib.sha256(SYSTEM_PROMPT.encode()).hexdigest()
    assert len(meta["tools_sha256"]) == 64 and "kyc_ozeti" in meta["tools"]
    assert meta["api_version"] and meta["date"] and meta["questions_sha256"]


def test_markdown_report_lists_the_mistakes(run_a: dict[str, Any], tmp_path: Path) -> None:
    report = (tmp_path / "a" / "qwen3_4b.md").read_text(encoding="utf-8")
    assert "| Tool selection (headline) | 5/8 (62.5%) |" in report
    mistakes = report.split("## Mistakes")[1].split("## Per tool")[0]
    assert [line.split("|")[1].strip() for line in mistakes.splitlines() if line.startswith("| ")][2:] == [
        "deposits",
        "two-plus-two",
        "note",
        "volume",
    ]


def test_compare_lists_exactly_the_changed_questions(
    run_a: dict[str, Any], agent_api: AgentApi, ollama: FakeOllama, tmp_path: Path
) -> None:
    ollama.script(rules=RULES_B)
    run_eval(agent_api, tmp_path, "b", "--quiet")
    proc = agent_eval("compare", str(tmp_path / "a"), str(tmp_path / "b" / "qwen3_4b.json"), "--json", cwd=tmp_path)
    changes = {q["id"]: q["change"] for q in json.loads(proc.stdout)["questions"]}
    assert changes == {"deposits": "fixed", "volume": "fixed", "positions": "broken"}
    markdown = agent_eval("compare", str(tmp_path / "a"), str(tmp_path / "b"), cwd=tmp_path).stdout
    assert "## Questions that changed (3)" in markdown
    assert "| accuracy | 5/8 (62.5%) | 5/8 (62.5%) |" in markdown  # one fixed, one broken
    assert "| strict_accuracy | 4/8 (50.0%) | 5/8 (62.5%) |" in markdown


def test_repeat_measures_run_to_run_variance(agent_api: AgentApi, ollama: FakeOllama, tmp_path: Path) -> None:
    flaky = {**call("what time", "sistem_bilgisi"), "times": 1}  # right once, then the model "forgets"
    ollama.script(rules=[flaky, *RULES_A[1:]])
    run_eval(agent_api, tmp_path, "rep", "--repeat", "2", "--only", "time", "--only", "listcomp")
    data = load(tmp_path / "rep" / "qwen3_4b.json")
    assert [(r["id"], r["repeat"], r["verdict"]) for r in data["records"]] == [
        ("time", 1, "correct"),
        ("listcomp", 1, "correct"),
        ("time", 2, "missed_call"),
        ("listcomp", 2, "correct"),
    ]
    variance = data["scores"]["variance"]
    assert [p["rate"] for p in variance["per_repeat"]] == [1.0, 0.5]
    assert variance["unstable"] == ["time"]


def test_models_are_compared_in_one_run(agent_api: AgentApi, ollama: FakeOllama, tmp_path: Path) -> None:
    small_model_mistake = {
        "when": {"user_contains": "what time", "last_role": "user", "model": "qwen2.5:3b"},
        "reply": {"content": "It is noon."},
    }
    ollama.script(rules=[small_model_mistake, *RULES_A])
    proc = run_eval(agent_api, tmp_path, "models", "--models", "qwen3:4b,qwen2.5:3b", "--quiet")
    big, small = load(tmp_path / "models" / "qwen3_4b.json"), load(tmp_path / "models" / "qwen2.5_3b.json")
    assert (big["meta"]["model"], small["meta"]["model"]) == ("qwen3:4b", "qwen2.5:3b")
    assert big["scores"]["accuracy"]["correct"] == 5 and small["scores"]["accuracy"]["correct"] == 4
    assert {r["id"]: r["verdict"] for r in small["records"]}["time"] == "missed_call"
    summary = (tmp_path / "models" / "summary.md").read_text(encoding="utf-8")
    assert "| score | qwen3:4b | qwen2.5:3b |" in summary and "summary.md" in proc.stdout


def test_mcp_url_fingerprints_each_tool_like_the_agent(
    agent_api: AgentApi, mcp_server: McpServer, ollama: FakeOllama, tmp_path: Path
) -> None:
    ollama.script(rules=RULES_A)
    run_eval(
        agent_api,
        tmp_path,
        "mcp",
        "--only",
        "time",
        "--quiet",
        "--mcp-url",
        mcp_server.url,
        f"--mcp-token={mcp_server.token}",  # a random token may start with "-", which argparse takes for an option
    )
    meta = load(tmp_path / "mcp" / "qwen3_4b.json")["meta"]
    assert meta["mcp_tools_sha256"] == meta["tools_sha256"]  # same formula as the agent's /v1/agent/info
    assert sorted(meta["tool_sha256"]) == sorted(meta["tools"]) and len(meta["tool_sha256"]) == len(TOOL_NAMES)


def test_fail_under_gates_on_tool_selection(agent_api: AgentApi, ollama: FakeOllama, tmp_path: Path) -> None:
    ollama.script(rules=RULES_A)
    only = ("--only", "time", "--only", "two-plus-two", "--quiet")  # 1 of 2 right
    run_eval(agent_api, tmp_path, "gate-low", *only, "--fail-under", "0.5")
    proc = run_eval(agent_api, tmp_path, "gate-high", *only, "--fail-under", "0.9", status=1)
    assert "tool selection 1/2" in proc.stdout
