"""agent-eval and refusals: Retry-After waited out within one budget per run, a refusal never scored as an
answer, the waits reported; a run on a scripted stand-in never titled with the model name it served."""

from __future__ import annotations

import email.utils
import json
import time
from typing import Any

import httpx

from agent.eval.patience import WaitBudget, retry_after
from agent.eval.questions import parse_questions
from agent.eval.report import render_run
from agent.eval.runner import AgentClient, run_model

QUESTIONS = parse_questions("""
questions:
  - {id: time, text: "What time is it?", expect: [sistem_bilgisi]}
  - {id: math, text: "What is 2+2?", expect: []}
""")


def completion(content: str) -> dict[str, Any]:
    return {"choices": [{"message": {"role": "assistant", "content": content}}],
            "local_agent": {"tools_used": [], "tool_calls": [], "rounds": 1}}  # fmt: skip


def limited_agent(refusals: int, info: dict[str, Any] | None = None, retry: str | None = "7") -> AgentClient:
    """An agent that refuses the first `refusals` chats with 429 (and Retry-After `retry`), then answers."""
    left = [refusals]

    def handle(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/agent/info":
            return httpx.Response(200, json=info or {"model": "qwen3:4b"})
        if request.url.path != "/v1/chat/completions":
            return httpx.Response(404)
        if left[0] > 0:
            left[0] -= 1
            headers = {"Retry-After": retry} if retry is not None else {}
            error = {"error": {"message": "rate limit", "code": "rate_limited"}}
            return httpx.Response(429, json=error, headers=headers)
        text = json.loads(request.content)["messages"][-1]["content"]
        return httpx.Response(200, json=completion("4" if "2+2" in text else "It is 10:00."))

    transport = httpx.MockTransport(handle)
    return AgentClient("http://agent.test/v1", transport=transport, budget=WaitBudget(60, sleep=slept.append))


slept: list[float] = []


def test_refusals_are_waited_out_and_reported_not_scored() -> None:
    slept.clear()
    run = run_model(limited_agent(refusals=3), "qwen3:4b", QUESTIONS)
    assert slept == [7.0, 7.0, 7.0]  # the agent's Retry-After, honoured
    assert [r.error for r in run.records] == [None, None] and run.scores["unanswered"] == 0
    assert sum(r.waits for r in run.records) == 3 and run.meta["refusal_waits"]["seconds"] == 21.0
    assert "Waited for Retry-After: 3 times, 21.0 s" in render_run(run)


def test_past_the_budget_a_refusal_is_unanswered_never_a_wrong_answer() -> None:
    slept.clear()
    run = run_model(limited_agent(refusals=100), "qwen3:4b", QUESTIONS)
    assert sum(slept) <= 60  # the whole run's budget, not per question
    assert all(r.verdict == "request_failed" and "HTTP 429" in (r.error or "") for r in run.records)
    assert run.scores["unanswered"] == 2 and run.scores["accuracy"]["total"] == 0
    assert "Not answered (refused or failed, scored nowhere): 2 of 2" in render_run(run)


def test_a_refusal_without_retry_after_is_not_retried() -> None:
    slept.clear()
    run = run_model(limited_agent(refusals=1, retry=None), "qwen3:4b", QUESTIONS)
    assert slept == [] and run.scores["unanswered"] == 1


def test_retry_after_as_an_http_date() -> None:
    later = email.utils.formatdate(time.time() + 30, usegmt=True)
    seconds = retry_after(httpx.Response(503, headers={"Retry-After": later}))
    assert seconds is not None and 25 <= seconds <= 31
    assert retry_after(httpx.Response(503, headers={"Retry-After": "soon"})) is None


def test_the_title_names_model_and_engine_and_never_calls_a_scripted_run_by_the_model_name() -> None:
    real = run_model(limited_agent(0, {"model": "smollm2:135m", "engine": "llamacpp (OpenAI protocol)"}),
                     "smollm2:135m", QUESTIONS)  # fmt: skip
    assert render_run(real).startswith("# agent-eval — smollm2:135m on llamacpp (OpenAI protocol) — ")
    info = {"model": "qwen3:4b", "engine": "scripted Ollama stand-in 0.33.0-fake", "engine_scripted": True}
    scripted = render_run(run_model(limited_agent(0, info), "qwen3:4b", QUESTIONS))
    title = scripted.splitlines()[0]
    assert title.startswith("# agent-eval — scripted model, not a real LLM (served as qwen3:4b)")
    assert "not a model" in scripted
