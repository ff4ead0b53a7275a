"""The grounding check in the tool loop: record, warn and withhold, streamed text included."""

from __future__ import annotations

from typing import Any

from agent.context import RequestContext
from agent.loop.engine import ToolLoop
from agent.loop.events import Caller, FinalEvent, LoopEvent, TextEvent, footer
from agent.settings import Settings
from agent.toolspec import ToolResult
from tests.unit.agent.conftest import MemoryToolBox, ScriptedBackend

Q = [{"role": "user", "content": "How many accounts are long on EURUSD?"}]
CALL = [("pozisyon_dagilimi", {"symbol": "EURUSD"})]


class PositionsToolBox(MemoryToolBox):
    async def call(self, name: str, arguments: dict[str, Any], context: RequestContext | None = None) -> ToolResult:
        return ToolResult(False, '{"symbol": "EURUSD", "long_accounts": 1234, "short_accounts": 567}')


async def run(settings: Settings, answer: str, mode: str) -> tuple[list[str], FinalEvent]:
    loop = ToolLoop(settings.model_copy(update={"grounding_mode": mode}), ScriptedBackend([CALL, answer]),
                    PositionsToolBox())  # type: ignore[arg-type]  # fmt: skip
    events: list[LoopEvent] = [e async for e in loop.run(Q, "qwen3:4b", Caller(), RequestContext("rid"))]
    final = events[-1]
    assert isinstance(final, FinalEvent)
    return [e.text for e in events if isinstance(e, TextEvent)], final


async def test_warn_streams_the_answer_then_the_warning_then_the_footer(settings: Settings) -> None:
    texts, final = await run(settings, "1,234 long and 999 short.", "warn")
    warning = "\n\n⚠ Not found in the tool results: 999 — check before acting on it."
    assert texts[-2:] == [warning, footer(["pozisyon_dagilimi"])]
    assert "".join(texts) == final.answer and final.answer.startswith("1,234 long and 999 short.")
    assert final.grounding is not None and final.grounding["action"] == "warned"


async def test_record_only_records(settings: Settings) -> None:
    texts, final = await run(settings, "1,234 long and 999 short.", "record")
    assert "⚠" not in final.answer and "".join(texts) == final.answer
    assert final.grounding is not None and final.grounding["status"] == "ungrounded"
    assert final.grounding["action"] == "none" and [u["text"] for u in final.grounding["ungrounded"]] == ["999"]


async def test_withhold_sends_no_text_before_the_check(settings: Settings) -> None:
    texts, final = await run(settings, "1,234 long and 999 short.", "withhold")
    assert texts[0].startswith("The answer was withheld") and "999 short" not in "".join(texts)
    assert "- pozisyon_dagilimi: long_accounts: 1234" in final.answer and "".join(texts) == final.answer
    texts, final = await run(settings, "1.234 long, 567 short: 1,801 in all.", "withhold")
    assert texts[0] == "1.234 long, 567 short: 1,801 in all." and final.grounding is not None
    assert final.grounding["status"] == "grounded" and final.grounding["checked"][2]["source"] == "derived"
