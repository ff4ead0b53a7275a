"""TOOL_CALLING=constrained on the scripted backend: the schema offers exactly the caller's tools, a chosen call
runs through the loop's checks, and a reply outside the schema is a clear error that runs nothing."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from agent.backends.base import RoundRequest
from agent.backends.openai_body import openai_body
from agent.context import RequestContext
from agent.errors import DependencyDown
from agent.loop.constrained import (
    ANSWER_DESCRIPTION,
    ARGUMENTS_LINE,
    CHOICE_LINE,
    DECISION_LINE,
    DECISION_MAX_TOKENS,
    InvalidDecision,
    choice_prompt,
    decision_schema,
    summary,
    system_prompt,
)
from agent.loop.engine import ToolLoop
from agent.loop.events import Caller, FinalEvent, LoopEvent, TextEvent
from agent.settings import Settings
from agent.toolspec import ToolSpec
from tests.unit.agent.conftest import MemoryToolBox, ScriptedBackend

Q = [{"role": "user", "content": "how many accounts are long on EURUSD?"}]
ANSWER = json.dumps({"tool": "answer_directly"})


def call(tool: str, **arguments: Any) -> str:
    return json.dumps({"tool": tool, "arguments": arguments})


@pytest.fixture
def constrained(settings: Settings) -> Settings:
    return settings.model_copy(update={"tool_calling": "constrained"})


async def run(settings: Settings, backend: ScriptedBackend, box: MemoryToolBox, caller: Caller | None = None
              ) -> list[LoopEvent]:  # fmt: skip
    loop = ToolLoop(settings, backend, box)  # type: ignore[arg-type]
    return [e async for e in loop.run(Q, "qwen3:4b", caller or Caller(), RequestContext("rid"))]


@pytest.fixture
def name_first(constrained: Settings) -> Settings:
    return constrained.model_copy(update={"tool_decision": "name_first"})


def choose(tool: str) -> str:
    return json.dumps({"tool": tool})


def offered_tools(request: RoundRequest) -> set[str]:
    assert request.schema is not None
    return {b["properties"]["tool"]["const"] for b in request.schema["anyOf"] if "arguments" in b["properties"]}


async def test_the_schema_names_exactly_the_permitted_tools(constrained: Settings) -> None:
    backend, box = ScriptedBackend([ANSWER, "Hello."]), MemoryToolBox()
    caller = Caller(role="desk", may_use=lambda name: name != "islem_hacmi")
    await run(constrained, backend, box, caller)
    decision = backend.requests[0]
    assert offered_tools(decision) == {"pozisyon_dagilimi", "sistem_bilgisi"}
    assert decision.tools is None  # the tools travel in the schema and the prompt, never as native `tools`
    system = decision.messages[0]["content"]
    assert DECISION_LINE in system and "### pozisyon_dagilimi" in system and "islem_hacmi" not in system
    assert system.endswith(f"### answer_directly\n{ANSWER_DESCRIPTION}")  # answering, described like a tool


async def test_a_chosen_tool_runs_then_answer_now_is_a_free_text_round_that_streams(constrained: Settings) -> None:
    replies = [call("pozisyon_dagilimi", symbol="EURUSD"), ANSWER, "12 long, 7 short."]
    backend, box = ScriptedBackend(replies), MemoryToolBox()
    events = await run(constrained, backend, box)
    final = events[-1]
    assert isinstance(final, FinalEvent)
    assert box.calls == [("pozisyon_dagilimi", {"symbol": "EURUSD"})]
    assert final.answer == "12 long, 7 short.\n\n---\nTools used: pozisyon_dagilimi"
    assert "".join(e.text for e in events if isinstance(e, TextEvent)) == final.answer  # no decision JSON shown
    assert [r.schema is not None for r in backend.requests] == [True, True, False]
    assert backend.requests[0].options["num_predict"] == DECISION_MAX_TOKENS  # over the longest bounded decision
    assert backend.requests[2].tools is None and final.rounds == 3
    assert final.trace[0].outcome == "ok" and final.usage.prompt_tokens == 30


async def test_the_duplicate_guard_applies_to_constrained_calls(constrained: Settings) -> None:
    same = call("pozisyon_dagilimi", symbol="EURUSD")
    backend, box = ScriptedBackend([same, same, "Done."]), MemoryToolBox()
    final = (await run(constrained, backend, box))[-1]
    assert isinstance(final, FinalEvent)
    assert len(box.calls) == 1 and [t.outcome for t in final.trace] == ["ok", "duplicate"]


@pytest.mark.parametrize(
    "reply",
    [
        '{"tool": "pozisyon_dagilimi", "arguments": {"symbol": "EUR',  # cut off / not JSON
        "Sure, let me call pozisyon_dagilimi for you.",  # prose: the server ignored the schema
        call("islem_hacmi", symbol="EURUSD"),  # a real tool, but not one this caller was offered
        call("drop_table", symbol="x"),  # an invented tool
        call("pozisyon_dagilimi", symbol=5),  # arguments of the wrong type for that tool
        json.dumps({"tool": "answer_directly", "text": "12"}),  # a key the schema does not have
        json.dumps({"tool": "answer_directly", "arguments": {}}),  # answering takes no arguments
        json.dumps({"decision": "answer"}),  # the old form: no tool named first
    ],
)
async def test_a_reply_outside_the_schema_is_a_clear_error_and_runs_nothing(constrained: Settings, reply: str) -> None:
    backend, box = ScriptedBackend([reply, ANSWER, "ok"]), MemoryToolBox()
    caller = Caller(role="desk", may_use=lambda name: name != "islem_hacmi")
    with pytest.raises(InvalidDecision) as raised:
        await run(constrained, backend, box, caller)
    assert box.calls == [] and len(backend.requests) == 1  # refused at the first decision, not later
    assert "schema" in raised.value.message and raised.value.code == "invalid_decision"
    assert "nothing was run" in raised.value.client_message


def test_each_branch_holds_one_tool_with_its_own_arguments() -> None:
    specs = MemoryToolBox().specs
    schema = decision_schema(specs)
    valid = jsonschema.Draft202012Validator(schema)
    assert valid.is_valid({"tool": "islem_hacmi", "arguments": {"symbol": "EURUSD"}})
    assert not valid.is_valid({"tool": "sistem_bilgisi", "arguments": {"symbol": 5}})
    assert not valid.is_valid({"tool": "islem_hacmi", "arguments": {}})  # required kept
    assert valid.is_valid({"tool": "answer_directly"}) and not valid.is_valid(
        {"tool": "answer_directly", "arguments": {}}
    )
    # an unbounded string argument is bounded, so a rambling model is stopped by the grammar, not the token limit
    assert not valid.is_valid({"tool": "islem_hacmi", "arguments": {"symbol": "E" * 201}})
    # the tool's name is the first property of every branch: a grammar writes it first, answering among the names
    assert {next(iter(branch["properties"])) for branch in schema["anyOf"]} == {"tool"}


def test_the_schema_travels_on_both_protocols_and_through_the_queue() -> None:
    schema = decision_schema(MemoryToolBox().specs)
    request = RoundRequest("m", [{"role": "user", "content": "q"}], None, {}, schema=schema)
    assert RoundRequest.from_dict(json.loads(json.dumps(request.to_dict()))) == request  # the queue's job payload
    assert request.ollama_body()["format"] == schema and "tools" not in request.ollama_body()
    body = openai_body(request, cache_prompt=False)
    expected = {"name": "decision", "schema": schema, "strict": True}
    assert body["response_format"] == {"type": "json_schema", "json_schema": expected}
    plain = RoundRequest("m", [], None, {})
    assert "format" not in plain.ollama_body() and "response_format" not in openai_body(plain, cache_prompt=False)


async def test_a_decision_round_the_server_dropped_is_asked_once_more(constrained: Settings) -> None:
    dropped = DependencyDown("The model server is unreachable (RemoteProtocolError)")
    backend, box = ScriptedBackend([dropped, ANSWER, "Hello."]), MemoryToolBox()
    final = (await run(constrained, backend, box))[-1]
    assert isinstance(final, FinalEvent) and final.answer == "Hello." and len(backend.requests) == 3
    backend = ScriptedBackend([dropped, dropped])
    with pytest.raises(DependencyDown):  # twice is the server being down: the request fails as before
        await run(constrained, backend, MemoryToolBox())


async def test_name_first_chooses_among_the_permitted_names_then_writes_that_tools_arguments(
    name_first: Settings,
) -> None:
    replies = [choose("pozisyon_dagilimi"), json.dumps({"symbol": "EURUSD"}), ANSWER, "12 long, 7 short."]
    backend, box = ScriptedBackend(replies), MemoryToolBox()
    caller = Caller(role="desk", may_use=lambda name: name != "islem_hacmi")
    final = (await run(name_first, backend, box, caller))[-1]
    assert isinstance(final, FinalEvent) and final.answer.startswith("12 long, 7 short.")
    assert box.calls == [("pozisyon_dagilimi", {"symbol": "EURUSD"})]
    first, second = backend.requests[0], backend.requests[1]
    assert first.schema is not None and first.tools is None
    assert first.schema["properties"].keys() == {"tool"}  # by name only
    assert first.schema["properties"]["tool"]["enum"] == ["pozisyon_dagilimi", "sistem_bilgisi", "answer_directly"]
    system = first.messages[0]["content"]
    assert CHOICE_LINE in system and "- pozisyon_dagilimi: positions" in system and "###" not in system
    assert f"- answer_directly: {ANSWER_DESCRIPTION}" in system
    assert "islem_hacmi" not in system
    # the second round: that tool alone, whole, under its own input schema; the question is still there
    assert ARGUMENTS_LINE.format(name="pozisyon_dagilimi") in second.messages[0]["content"]
    assert "### pozisyon_dagilimi" in second.messages[0]["content"] and "sistem_bilgisi" not in str(second.messages)
    assert second.schema is not None and second.schema["properties"].keys() == {"symbol"}
    assert second.messages[1:] == first.messages[1:] and second.round == first.round
    # the next decision is a name again, then the answer streams under its own prompt
    assert backend.requests[2].messages[0]["content"] == system and backend.requests[3].schema is None


async def test_name_first_asks_no_arguments_of_a_tool_that_takes_none(name_first: Settings) -> None:
    backend, box = ScriptedBackend([choose("sistem_bilgisi"), ANSWER, "It is noon."]), MemoryToolBox()
    await run(name_first, backend, box)
    assert box.calls == [("sistem_bilgisi", {})] and len(backend.requests) == 3


@pytest.mark.parametrize(
    "replies",
    [
        [choose("islem_hacmi")],  # a real tool this caller was not offered
        [call("pozisyon_dagilimi", symbol="X")],  # no arguments yet
        [choose("pozisyon_dagilimi"), json.dumps({"symbol": 5})],  # arguments of the wrong type
        [choose("pozisyon_dagilimi"), json.dumps({"symbol": "EURUSD", "side": "long"})],  # one it does not take
        [choose("pozisyon_dagilimi"), '{"symbol": "EUR'],  # cut off
        [choose("pozisyon_dagilimi"), '["EURUSD"]'],  # not an object
    ],
)
async def test_name_first_runs_nothing_outside_either_schema(name_first: Settings, replies: list[str]) -> None:
    backend, box = ScriptedBackend([*replies, ANSWER, "ok"]), MemoryToolBox()
    caller = Caller(role="desk", may_use=lambda name: name != "islem_hacmi")
    with pytest.raises(InvalidDecision) as raised:
        await run(name_first, backend, box, caller)
    assert box.calls == [] and len(backend.requests) == len(replies)
    assert raised.value.code == "invalid_decision"


def test_a_summary_is_the_first_line_and_the_example() -> None:
    spec = ToolSpec(
        "depozit_ozeti",
        'Returns deposits for a day.\n\n    WHEN TO USE: deposits.\n    Example: "Bugün kaç dolar yatırıldı?"\n',
        {"type": "object", "properties": {}},
    )
    assert summary(spec) == 'Returns deposits for a day. Example: "Bugün kaç dolar yatırıldı?"'
    assert summary(ToolSpec("x", "One line only.", {})) == "One line only."
    whole, short = system_prompt("base", [spec]), choice_prompt("base", [spec])
    assert "WHEN TO USE" in whole and "WHEN TO USE" not in short  # the tokens it saves: scripts/bench-constrained
    assert f"- depozit_ozeti: {summary(spec)}" in short
