"""A call written as text (issue 37: Qwen2.5-Coder writes ```json {"name", "arguments"}``` instead of <tool_call>)
runs only when the whole reply is one call of an offered tool with schema-valid arguments; every other variant,
hostile or innocent, stays plain text and is never executed. The text of a recognised call never reaches the user."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent.context import RequestContext
from agent.loop.engine import ToolLoop
from agent.loop.events import Caller, FinalEvent, LoopEvent, TextEvent
from agent.loop.textcall import could_be_call, parse_text_call
from agent.settings import Settings
from agent.toolspec import ToolSpec
from tests.unit.agent.conftest import SCHEMA, MemoryToolBox, ScriptedBackend

OFFERED = [ToolSpec("pozisyon_dagilimi", "positions", SCHEMA), ToolSpec("sistem_bilgisi", "time", {"type": "object"})]
CALL = {"name": "pozisyon_dagilimi", "arguments": {"symbol": "EURUSD"}}
FENCED = "```json\n" + json.dumps(CALL) + "\n```"


@pytest.mark.parametrize(
    "text",
    [
        FENCED,
        json.dumps(CALL),
        "  \n" + FENCED + "\n",
        "```\n" + json.dumps(CALL, indent=2) + "\n```",
        json.dumps({"tool": "pozisyon_dagilimi", "arguments": {"symbol": "EURUSD"}}),
    ],
    ids=["fenced", "bare", "padded", "fence-without-label", "decision-written-out"],
)
def test_a_whole_reply_that_is_one_call_of_an_offered_tool_is_that_call(text: str) -> None:
    call = parse_text_call(text, OFFERED, "call_1")
    assert call is not None
    assert (call.id, call.name, call.arguments) == ("call_1", "pozisyon_dagilimi", CALL["arguments"])


def test_a_tool_without_arguments_may_leave_them_out() -> None:
    call = parse_text_call('{"name": "sistem_bilgisi"}', OFFERED, "c")
    assert call is not None and call.arguments == {}


@pytest.mark.parametrize(
    "text",
    [
        json.dumps({"name": "delete_everything", "arguments": {}}),  # not offered (unknown, or not the caller's)
        json.dumps({"name": "islem_hacmi", "arguments": {"symbol": "EURUSD"}}),  # real, but not offered here
        json.dumps({"name": "pozisyon_dagilimi", "arguments": {"symbol": 5}}),  # breaks the schema
        json.dumps({"name": "pozisyon_dagilimi", "arguments": {}}),  # a required argument missing
        json.dumps({"name": "pozisyon_dagilimi", "arguments": "symbol=EURUSD"}),  # arguments not an object
        "Here is the call: " + FENCED,  # JSON inside prose
        FENCED + "\nThis returns the positions.",  # prose after it
        json.dumps(CALL) + json.dumps(CALL),  # two objects
        json.dumps({**CALL, "result": 12}),  # data the model wrote, not a call
        json.dumps({"tool": "answer_directly"}),  # a constrained "answer yourself" written out
        json.dumps([CALL]),
        "```python\nprint(1)\n```",
        '{"name": "pozisyon_dagilimi", "arguments": {"symbol": "EUR',  # cut off
        "The EURUSD positions: 12 long, 7 short.",
    ],
    ids=[
        "unknown",
        "not-offered",
        "invalid-type",
        "missing-required",
        "args-not-object",
        "in-prose",
        "prose-after",
        "two-objects",
        "extra-keys",
        "decision-answer",
        "array",
        "python-fence",
        "cut-off",
        "plain",
    ],
)
def test_anything_else_is_plain_text(text: str) -> None:
    assert parse_text_call(text, OFFERED, "c") is None


@pytest.mark.parametrize(
    ("text", "held"),
    [
        ("", True),
        ("  {", True),
        ("```", True),
        ("```js", True),
        ("```json\n{", True),
        ("```\n{", True),
        ("The", False),
        ("```python", False),
        ("```py\n", False),
        ("I think {", False),
    ],
)
def test_text_is_held_back_only_while_it_may_still_be_a_call(text: str, held: bool) -> None:
    assert could_be_call(text) is held


Q = [{"role": "user", "content": "how many accounts are long on EURUSD?"}]


async def run(settings: Settings, replies: list[Any], caller: Caller | None = None) -> tuple[list[LoopEvent], Any]:
    backend, box = ScriptedBackend(replies), MemoryToolBox()
    loop = ToolLoop(settings, backend, box)  # type: ignore[arg-type]
    events = [e async for e in loop.run(Q, "qwen2.5-coder:1.5b", caller or Caller(), RequestContext("rid"))]
    return events, (backend, box)


def shown(events: list[LoopEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextEvent))


async def test_native_mode_runs_a_fenced_json_call_like_a_native_one_and_never_shows_it(settings: Settings) -> None:
    events, (backend, box) = await run(settings, [FENCED, "12 long, 7 short."])
    final = events[-1]
    assert isinstance(final, FinalEvent)
    assert box.calls == [("pozisyon_dagilimi", {"symbol": "EURUSD"})]
    assert final.answer == "12 long, 7 short.\n\n---\nTools used: pozisyon_dagilimi"
    assert shown(events) == final.answer and "```" not in shown(events)
    assert final.trace[0].outcome == "ok" and final.rounds == 2
    history = backend.requests[1].messages[-2]  # the call goes back to the model as a call, not as text
    assert history["role"] == "assistant" and history["content"] == ""
    assert history["tool_calls"][0]["function"]["name"] == "pozisyon_dagilimi"


async def test_a_call_written_as_text_for_a_tool_the_caller_may_not_use_runs_nothing(settings: Settings) -> None:
    text = json.dumps({"name": "islem_hacmi", "arguments": {"symbol": "EURUSD"}})
    caller = Caller(user="u", role="desk", may_use=lambda name: name != "islem_hacmi")
    events, (backend, box) = await run(settings, [text], caller)
    final = events[-1]
    assert isinstance(final, FinalEvent)
    assert box.calls == [] and final.trace == [] and len(backend.requests) == 1
    assert final.answer == text == shown(events)  # plain text, shown as the model wrote it


@pytest.mark.parametrize(
    "text",
    [json.dumps({"name": "pozisyon_dagilimi", "arguments": {"symbol": 5}}), "Use this: " + FENCED],
    ids=["invalid-arguments", "json-in-prose"],
)
async def test_an_invalid_or_embedded_call_is_plain_text_and_runs_nothing(settings: Settings, text: str) -> None:
    events, (backend, box) = await run(settings, [text])
    final = events[-1]
    assert isinstance(final, FinalEvent)
    assert box.calls == [] and final.answer == text == shown(events) and len(backend.requests) == 1


async def test_the_final_round_without_tools_runs_no_call_written_as_text(settings: Settings) -> None:
    replies: list[Any] = [[("islem_hacmi", {"symbol": s})] for s in ("A", "B", "C")] + [FENCED]
    events, (backend, box) = await run(settings, replies)
    final = events[-1]
    assert isinstance(final, FinalEvent)
    assert len(box.calls) == 3 and backend.requests[-1].tools is None
    assert final.answer.startswith(FENCED)  # nothing offered in that round: it stays text


async def test_json_that_is_no_call_after_a_tool_result_is_not_shown_and_the_answer_round_follows(
    settings: Settings,
) -> None:
    pasted = json.dumps(CALL) + '\n({"symbol": "EURUSD", "long": 12, "short": 7})'  # the call again, result pasted
    events, (backend, box) = await run(settings, [FENCED, pasted, "12 long, 7 short."])
    final = events[-1]
    assert isinstance(final, FinalEvent)
    assert box.calls == [("pozisyon_dagilimi", {"symbol": "EURUSD"})]  # run once: the pasted reply runs nothing
    assert backend.requests[2].tools is None  # the answer round, under its own prompt
    assert final.answer == "12 long, 7 short.\n\n---\nTools used: pozisyon_dagilimi" == shown(events)
