"""The answer round (issue 37). TOOL_CALLING=constrained: the free-text round runs under its own prompt, not the
decision's (kept, a real model answered with JSON or a call written as text on 20 of 24 questions), with the calls
of the history left out and their results kept as data; a call it still writes as text runs through the loop's
checks like a decided one, then the model decides again. Natively: the round without tools is the same."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent.context import RequestContext
from agent.loop.constrained import DECISION_LINE
from agent.loop.engine import ToolLoop
from agent.loop.events import Caller, FinalEvent, LoopEvent, TextEvent
from agent.loop.prompt import ANSWER_LINE, SYSTEM_PROMPT
from agent.settings import Settings
from tests.unit.agent.conftest import MemoryToolBox, ScriptedBackend

Q = [{"role": "user", "content": "how many accounts are long on EURUSD?"}]
ANSWER = json.dumps({"tool": "answer_directly"})
CALL = json.dumps({"tool": "pozisyon_dagilimi", "arguments": {"symbol": "EURUSD"}})


@pytest.fixture
def constrained(settings: Settings) -> Settings:
    return settings.model_copy(update={"tool_calling": "constrained"})


async def run(settings: Settings, replies: list[Any], caller: Caller | None = None) -> tuple[list[LoopEvent], Any]:
    backend, box = ScriptedBackend(replies), MemoryToolBox()
    loop = ToolLoop(settings, backend, box)  # type: ignore[arg-type]
    return [e async for e in loop.run(Q, "qwen2.5-coder:1.5b", caller or Caller(), RequestContext("rid"))], (
        backend,
        box,
    )


async def test_the_answer_round_has_its_own_prompt_without_the_decision_line_or_the_catalogue(
    constrained: Settings,
) -> None:
    _, (backend, _box) = await run(constrained, [CALL, ANSWER, "12 long, 7 short."])
    decision, answer = backend.requests[1].messages[0]["content"], backend.requests[2].messages[0]["content"]
    assert DECISION_LINE in decision and "### pozisyon_dagilimi" in decision
    assert answer == f"{SYSTEM_PROMPT}\n\n{ANSWER_LINE}"
    assert DECISION_LINE not in answer and "pozisyon_dagilimi" not in answer
    # The calls are left out (a small model copied them instead of answering); the results stay, as delimited data.
    question, result = backend.requests[2].messages[1:]
    assert question == Q[0] and result["role"] == "user"
    assert result["content"] == backend.requests[1].messages[-1]["content"]
    assert result["content"].startswith('<tool_result tool="pozisyon_dagilimi">')
    assert not any(m.get("tool_calls") for m in backend.requests[2].messages)


async def test_a_call_the_answer_round_writes_as_text_runs_through_the_checks_then_the_model_decides_again(
    constrained: Settings,
) -> None:
    fenced = '```json\n{"name": "pozisyon_dagilimi", "arguments": {"symbol": "EURUSD"}}\n```'
    events, (backend, box) = await run(constrained, [ANSWER, fenced, ANSWER, "12 long, 7 short."])
    final = events[-1]
    assert isinstance(final, FinalEvent)
    assert box.calls == [("pozisyon_dagilimi", {"symbol": "EURUSD"})] and final.trace[0].outcome == "ok"
    assert [r.schema is not None for r in backend.requests] == [True, False, True, False]
    assert final.answer == "12 long, 7 short.\n\n---\nTools used: pozisyon_dagilimi"
    assert "".join(e.text for e in events if isinstance(e, TextEvent)) == final.answer  # the JSON never shown


async def test_a_call_written_as_text_for_a_tool_the_caller_may_not_use_stays_text(constrained: Settings) -> None:
    text = '{"name": "islem_hacmi", "arguments": {"symbol": "EURUSD"}}'
    caller = Caller(user="u", role="desk", may_use=lambda name: name != "islem_hacmi")
    events, (backend, box) = await run(constrained, [ANSWER, text], caller)
    final = events[-1]
    assert isinstance(final, FinalEvent)
    assert box.calls == [] and final.trace == [] and len(backend.requests) == 2 and final.answer == text


async def test_natively_the_round_without_tools_is_an_answer_round_with_the_answer_prompt(settings: Settings) -> None:
    call = [("islem_hacmi", {"symbol": "EURUSD"})]
    _, (backend, _box) = await run(settings, [call, call, "12 long, 7 short."])  # a repeat: straight to the answer
    assert backend.requests[2].tools is None
    assert backend.requests[2].messages[0]["content"] == f"{SYSTEM_PROMPT}\n\n{ANSWER_LINE}"
    assert backend.requests[0].messages[0]["content"] == SYSTEM_PROMPT  # rounds offering tools keep theirs


async def test_the_loops_own_note_on_a_repeated_call_is_not_in_the_answer_round(settings: Settings) -> None:
    call = [("islem_hacmi", {"symbol": "EURUSD"})]
    _, (backend, _box) = await run(settings, [call, call, "12 long, 7 short."])
    answer = backend.requests[2].messages
    assert [m["role"] for m in answer] == ["system", "user", "user"]  # the question and the one real result
    assert "islem_hacmi result" in answer[2]["content"]
    assert not any("already made" in m["content"] for m in answer)  # a small model echoed it as its answer
