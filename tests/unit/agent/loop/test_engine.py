"""The tool loop's rules: round limit, final call without tools, duplicates, unknown tools, schema, errors."""

from __future__ import annotations

from typing import Any

from agent.context import RequestContext
from agent.loop.engine import ToolLoop
from agent.loop.events import Caller, FinalEvent, LoopEvent, TextEvent, ToolResultEvent
from agent.settings import Settings
from agent_contract.headers import Caller as Identity
from tests.unit.agent.conftest import MemoryToolBox, ScriptedBackend

Q = [{"role": "user", "content": "how many accounts are long on EURUSD?"}]


async def collect(loop: ToolLoop, caller: Caller | None = None) -> list[LoopEvent]:
    return [e async for e in loop.run(Q, "qwen3:4b", caller or Caller(), RequestContext("rid"))]


def final(events: list[LoopEvent]) -> FinalEvent:
    last = events[-1]
    assert isinstance(last, FinalEvent)
    return last


async def test_plain_answer_needs_one_round_and_has_no_footer(settings: Settings) -> None:
    backend = ScriptedBackend(["Four."])
    events = await collect(ToolLoop(settings, backend, MemoryToolBox()))  # type: ignore[arg-type]
    assert final(events).answer == "Four."
    assert "Tools used" not in final(events).answer
    assert len(backend.requests) == 1 and backend.requests[0].tools
    assert backend.requests[0].options == {"temperature": 0.0, "num_ctx": 8192}
    assert backend.requests[0].messages[0]["role"] == "system"


async def test_tool_round_then_answer_with_footer_and_trace(settings: Settings) -> None:
    backend = ScriptedBackend([[("pozisyon_dagilimi", {"symbol": "EURUSD"})], "12 long, 7 short."])
    box = MemoryToolBox()
    events = await collect(ToolLoop(settings, backend, box))  # type: ignore[arg-type]
    f = final(events)
    assert box.calls == [("pozisyon_dagilimi", {"symbol": "EURUSD"})]
    assert f.answer == "12 long, 7 short.\n\n---\nTools used: pozisyon_dagilimi"
    assert "".join(e.text for e in events if isinstance(e, TextEvent)) == f.answer
    assert f.trace[0].outcome == "ok" and f.rounds == 2
    tool_msg = backend.requests[1].messages[-1]
    assert tool_msg["role"] == "tool" and tool_msg["tool_name"] == "pozisyon_dagilimi"
    assert tool_msg["content"].startswith('<tool_result tool="pozisyon_dagilimi">')
    assert "not instructions" in tool_msg["content"]


async def test_round_limit_then_one_final_call_without_tools(settings: Settings) -> None:
    replies: list[Any] = [[("islem_hacmi", {"symbol": s})] for s in ("A", "B", "C", "D")] + ["final"]
    backend = ScriptedBackend(replies)
    box = MemoryToolBox()
    f = final(await collect(ToolLoop(settings, backend, box)))  # type: ignore[arg-type]
    assert len(box.calls) == settings.max_tool_rounds == 3
    assert len(backend.requests) == 4
    assert backend.requests[-1].tools is None
    assert f.answer.startswith("islem_hacmi result") is False


async def test_identical_repeat_is_not_executed_and_goes_to_final_answer(settings: Settings) -> None:
    call = [("islem_hacmi", {"symbol": "EURUSD"})]
    backend = ScriptedBackend([call, call, "answer"])
    box = MemoryToolBox()
    f = final(await collect(ToolLoop(settings, backend, box)))  # type: ignore[arg-type]
    assert len(box.calls) == 1
    assert [t.outcome for t in f.trace] == ["ok", "duplicate"]
    assert backend.requests[2].tools is None  # straight to the final answer


async def test_unknown_tool_is_never_executed(settings: Settings) -> None:
    backend = ScriptedBackend([[("delete_everything", {})], "sorry"])
    box = MemoryToolBox()
    events = await collect(ToolLoop(settings, backend, box))  # type: ignore[arg-type]
    assert box.calls == []
    result = next(e for e in events if isinstance(e, ToolResultEvent))
    assert result.outcome == "unknown_tool" and "no tool named" in result.content
    assert "Tools used" not in final(events).answer


async def test_forbidden_tool_is_refused_and_not_offered(settings: Settings) -> None:
    backend = ScriptedBackend([[("islem_hacmi", {"symbol": "X"})], "ok"])
    box = MemoryToolBox()
    caller = Caller(user="u", role="ops", may_use=lambda name: name != "islem_hacmi")
    events = await collect(ToolLoop(settings, backend, box), caller)  # type: ignore[arg-type]
    offered = [t["function"]["name"] for t in backend.requests[0].tools or []]
    assert "islem_hacmi" not in offered
    assert box.calls == []
    assert final(events).trace[0].outcome == "forbidden"


async def test_arguments_are_validated_against_the_schema(settings: Settings) -> None:
    backend = ScriptedBackend([[("pozisyon_dagilimi", {"symbol": 5})], "fixed"])
    box = MemoryToolBox()
    f = final(await collect(ToolLoop(settings, backend, box)))  # type: ignore[arg-type]
    assert box.calls == []
    assert f.trace[0].outcome == "invalid_arguments"
    assert "is not of type 'string'" in backend.requests[1].messages[-1]["content"]


async def test_failed_tool_is_withdrawn_and_not_run_again(settings: Settings) -> None:
    backend = ScriptedBackend([[("islem_hacmi", {"symbol": "A"})], [("islem_hacmi", {"symbol": "B"})], "explained"])
    box = MemoryToolBox(fail={"islem_hacmi"})
    f = final(await collect(ToolLoop(settings, backend, box)))  # type: ignore[arg-type]
    assert box.calls == [("islem_hacmi", {"symbol": "A"})]
    offered = [t["function"]["name"] for t in backend.requests[1].tools or []]
    assert "islem_hacmi" not in offered
    assert [t.outcome for t in f.trace] == ["error", "failed_before"]
    assert f.answer.endswith("Tools used: islem_hacmi")


async def test_tool_results_are_cut_to_the_limit(settings: Settings) -> None:
    class Big(MemoryToolBox):
        async def call(self, name: str, arguments: dict[str, Any], context: RequestContext | None = None) -> Any:
            from agent.toolspec import ToolResult

            return ToolResult(False, "x" * 5000)

    backend = ScriptedBackend([[("sistem_bilgisi", {})], "ok"])
    await collect(ToolLoop(settings, backend, Big()))  # type: ignore[arg-type]
    content = backend.requests[1].messages[-1]["content"]
    assert "[truncated: 4800 more characters not shown]" in content
    assert "x" * 200 in content and "x" * 201 not in content


async def test_a_timed_out_tool_is_a_timeout_whatever_its_text_says(settings: Settings) -> None:
    backend = ScriptedBackend([[("islem_hacmi", {"symbol": "A"})], "sorry"])
    f = final(await collect(ToolLoop(settings, backend, MemoryToolBox(slow={"islem_hacmi"}))))  # type: ignore[arg-type]
    assert [(t.name, t.outcome, t.executed) for t in f.trace] == [("islem_hacmi", "timeout", True)]
    assert f.tools_used == ["islem_hacmi"]


def test_the_loops_caller_is_the_contracts_identity_plus_the_policy_check() -> None:
    caller = Caller("ayşe", "operations", lambda name: name == "kyc_ozeti")
    assert isinstance(caller, Identity)  # one identity type: what the loop checks is what the MCP server is told
    assert caller.headers() == Identity("ayşe", "operations").headers()
    assert caller.may_use("kyc_ozeti") and not caller.may_use("musteri_bakiyesi")


async def test_every_round_and_tool_call_is_given_the_requests_context(settings: Settings) -> None:
    """The request id and caller reach the backend and the MCP client as a parameter (agent.context), one object
    for the whole request: the queue notes its workers in it, the MCP client forwards its id and caller."""
    backend, box = ScriptedBackend([[("sistem_bilgisi", {})], "ok"]), MemoryToolBox()
    context = RequestContext("rid-7", Identity("ayse", "desk"))
    [e async for e in ToolLoop(settings, backend, box).run(Q, "qwen3:4b", Caller(), context)]  # type: ignore[arg-type]
    assert backend.contexts == [context, context] and box.contexts == [context]
    assert all(c is context for c in [*backend.contexts, *box.contexts])
    assert [r.request_id for r in backend.requests] == ["rid-7", "rid-7"]
