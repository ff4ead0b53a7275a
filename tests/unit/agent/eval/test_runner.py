"""The HTTP side of agent-eval against httpx.MockTransport: the trace, errors, run facts, model choice."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from agent.eval.errors import AgentUnreachable
from agent.eval.questions import parse_questions
from agent.eval.records import Record
from agent.eval.runner import AgentClient, resolve_models, run_model

QUESTIONS = parse_questions("""
questions:
  - {id: time, text: "What time is it?", expect: [sistem_bilgisi]}
  - {id: math, text: "What is 2+2?", expect: []}
""")
INFO = {
    "model": "qwen3:4b",
    "ollama_version": "0.12.6",
    "agent_version": "0.1.0",
    "system_prompt_sha256": "p" * 64,
    "tools_sha256": "t" * 64,
    "tools": ["sistem_bilgisi"],
    "max_tool_rounds": 5,
    "options": {"temperature": 0},
}
Handler = Callable[[httpx.Request], httpx.Response]


def completion(content: str, calls: list[dict[str, Any]], rounds: int) -> dict[str, Any]:
    trace = {"tools_used": [c["name"] for c in calls], "tool_calls": calls, "rounds": rounds}
    return {"choices": [{"message": {"role": "assistant", "content": content}}], "local_agent": trace}


def agent(info: dict[str, Any] | None = INFO, chat: Handler | None = None) -> tuple[AgentClient, list[Any]]:
    sent: list[Any] = []

    def handle(request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/v1/agent/info":
            return httpx.Response(200, json=info) if info else httpx.Response(404, json={"detail": "Not Found"})
        if path == "/api/version":
            return httpx.Response(200, json={"version": "0.1.0"})
        if path == "/v1/models":
            return httpx.Response(200, json={"data": [{"id": "qwen2.5:3b"}, {"id": "qwen3:4b"}]})
        body = json.loads(request.content)
        sent.append(body)
        if chat is not None:
            return chat(request)
        if "time" in body["messages"][-1]["content"]:
            call = {"name": "sistem_bilgisi", "arguments": {}, "outcome": "ok", "round": 1, "result_chars": 40}
            return httpx.Response(200, json=completion("It is 10:00.\n\n---\nTools used: sistem_bilgisi", [call], 2))
        return httpx.Response(200, json=completion("4", [], 1))

    client = AgentClient("http://agent.test/v1/", api_key="k", transport=httpx.MockTransport(handle))
    return client, sent


def test_run_records_the_trace_and_what_was_measured() -> None:
    client, sent = agent()
    run = run_model(client, "qwen3:4b", QUESTIONS, repeat=2)
    assert [(r.id, r.repeat, r.verdict) for r in run.records] == [
        ("time", 1, "correct"),
        ("math", 1, "correct"),
        ("time", 2, "correct"),
        ("math", 2, "correct"),
    ]
    first = run.records[0]
    assert [(c.name, c.arguments, c.outcome) for c in first.calls] == [("sistem_bilgisi", {}, "ok")]
    assert (first.rounds, first.answer.startswith("It is 10:00")) == (2, True)
    assert sent[0] == {
        "model": "qwen3:4b",
        "stream": False,
        "messages": [{"role": "user", "content": "What time is it?"}],
    }
    meta = run.meta
    assert (meta["model"], meta["ollama_version"], meta["api_version"]) == ("qwen3:4b", "0.12.6", "0.1.0")
    assert (meta["system_prompt_sha256"], meta["tools_sha256"]) == ("p" * 64, "t" * 64)
    assert meta["questions_sha256"] == QUESTIONS.sha256 and meta["repeat"] == 2 and meta["agent_info_available"]
    assert run.scores["accuracy"]["rate"] == 1.0


def test_without_agent_info_the_facts_are_null_unless_mcp_gave_them() -> None:
    client, _ = agent(info=None)
    meta = run_model(client, "qwen3:4b", QUESTIONS.select(["math"])).meta
    assert (meta["ollama_version"], meta["system_prompt_sha256"], meta["tools_sha256"]) == (None, None, None)
    assert meta["agent_info_available"] is False and meta["api_version"] == "0.1.0"
    fp = {"tools_sha256": "m" * 64, "tool_sha256": {"a": "1"}, "tools": ["a"]}
    meta = run_model(client, "qwen3:4b", QUESTIONS.select(["math"]), tool_fingerprints=fp).meta
    assert (meta["tools_sha256"], meta["tool_sha256"], meta["mcp_tools_sha256"]) == ("m" * 64, {"a": "1"}, "m" * 64)


@pytest.mark.parametrize(
    ("response", "error"),
    [
        (httpx.Response(503, json={"error": {"message": "Ollama is down", "type": "x"}}), "HTTP 503: Ollama is down"),
        (httpx.Response(502, text="bad gateway"), "HTTP 502: bad gateway"),
        (httpx.Response(200, json={"choices": [{"message": {"content": "hi"}}]}), "no `local_agent` trace"),
        (httpx.Response(200, json={"unexpected": True}), "not a chat completion"),
    ],
)
def test_failed_requests_are_recorded_not_scored_as_answers(response: httpx.Response, error: str) -> None:
    client, _ = agent(chat=lambda request: response)
    r = client.ask("qwen3:4b", Record.for_question(QUESTIONS.questions[0], 1))
    assert r.error is not None and error in r.error and r.calls == []


def test_a_transport_failure_mid_run_is_a_failed_record() -> None:
    def broken(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    client, _ = agent(chat=broken)
    run = run_model(client, "qwen3:4b", QUESTIONS)
    assert [r.verdict for r in run.records] == ["request_failed", "request_failed"]
    assert run.records[0].error == "ReadTimeout: timed out"


def test_an_unreachable_agent_fails_fast_with_the_url() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    client = AgentClient("http://agent.test/v1", transport=httpx.MockTransport(refuse))
    with pytest.raises(AgentUnreachable, match=r"agent\.test/v1/agent/info"):
        run_model(client, "qwen3:4b", QUESTIONS)


def test_model_choice_defaults_to_the_agent_s_model() -> None:
    client, _ = agent()
    assert resolve_models(client, ["a", "b"]) == ["a", "b"]
    assert resolve_models(client, []) == ["qwen3:4b"]
    bare, _ = agent(info=None)
    assert resolve_models(bare, []) == ["qwen2.5:3b"]  # first of /v1/models when there is no info endpoint


def test_api_key_and_server_root() -> None:
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"version": "1"})

    client = AgentClient("http://h:8000/v1", api_key="secret", transport=httpx.MockTransport(handle))
    assert client.api_version() == "1"
    assert str(seen[0].url) == "http://h:8000/api/version"
    assert seen[0].headers["Authorization"] == "Bearer secret"


def test_run_reads_the_grounding_verdict_from_the_trace() -> None:
    verdict = {"status": "ungrounded", "figures": 1, "ungrounded": [{"text": "125", "kind": "count", "nearest": ""}]}

    def chat(request: httpx.Request) -> httpx.Response:
        body = completion("There are 125.", [], 1)
        body["local_agent"]["grounding"] = verdict
        return httpx.Response(200, json=body)

    client, _ = agent(chat=chat)
    run = run_model(client, "qwen3:4b", QUESTIONS, repeat=1)
    assert [r.grounding for r in run.records] == [verdict, verdict]
    assert run.scores["grounding"]["total"] == 2 and run.scores["grounding"]["correct"] == 0
