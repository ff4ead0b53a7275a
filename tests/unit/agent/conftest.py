"""Unit-test doubles for the agent: a scripted model backend and an in-memory tool box (no services)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from agent.backends.base import ModelStatus, RoundDone, RoundEvent, RoundRequest, TextDelta, ToolCall, ToolCallsDelta
from agent.context import RequestContext
from agent.settings import Settings
from agent.toolspec import ArgumentRules, ToolResult, ToolSpec

SCHEMA = {"type": "object", "properties": {"symbol": {"type": "string"}}, "required": ["symbol"]}


class ScriptedBackend:
    """Replies from a list, one per round: a str is text, a list of (name, args) is tool calls."""

    def __init__(self, replies: list[Any]) -> None:
        self.replies = list(replies)
        self.requests: list[RoundRequest] = []
        self.contexts: list[RequestContext | None] = []  # the request context each round was given

    async def stream_round(
        self, request: RoundRequest, context: RequestContext | None = None
    ) -> AsyncIterator[RoundEvent]:
        self.requests.append(request)
        self.contexts.append(context)
        reply = self.replies.pop(0) if self.replies else "done"
        if isinstance(reply, Exception):
            raise reply
        if isinstance(reply, str):
            for word in reply.split(" "):
                yield TextDelta(word + " " if word != reply.split(" ")[-1] else word)
        else:
            calls = [ToolCall(f"call_{i}", name, args) for i, (name, args) in enumerate(reply)]
            yield ToolCallsDelta(calls)
        yield RoundDone(prompt_tokens=10, completion_tokens=3)

    async def status(self) -> ModelStatus:
        return ModelStatus(True, ["qwen3:4b"], "test")

    async def aclose(self) -> None:
        return None


class MemoryToolBox:
    """The ToolBox interface over plain functions; records every executed call."""

    def __init__(self, fail: set[str] | None = None, slow: set[str] | None = None) -> None:
        self.specs = [
            ToolSpec("pozisyon_dagilimi", "positions", SCHEMA),
            ToolSpec("islem_hacmi", "volume", SCHEMA),
            ToolSpec("sistem_bilgisi", "time", {"type": "object", "properties": {}}),
        ]
        self.fail = fail or set()
        self.slow = slow or set()
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.contexts: list[RequestContext | None] = []  # the request context each call was given

    async def list_tools(self, refresh: bool = False, context: RequestContext | None = None) -> list[ToolSpec]:
        return self.specs

    async def call(self, name: str, arguments: dict[str, Any], context: RequestContext | None = None) -> ToolResult:
        self.calls.append((name, arguments))
        self.contexts.append(context)
        if name in self.slow:  # as the real ToolBox reports a tool past TOOL_TIMEOUT_SECONDS
            return ToolResult(True, f"{name} took too long.", timed_out=True)
        if name in self.fail:
            return ToolResult(True, f"Error executing tool {name}: database offline")
        # The figures the scripted answers state, so a correct scripted answer is grounded (docs/grounding.md).
        return ToolResult(False, f"{name} result for {arguments}: long 12, short 7")

    def audit_rules(self, name: str) -> ArgumentRules:
        return next((s.audit for s in self.specs if s.name == name), ArgumentRules())

    async def problem(self) -> str | None:
        return None

    async def aclose(self) -> None:
        return None


@pytest.fixture
def settings() -> Settings:
    return Settings(max_tool_rounds=3, tool_result_max_chars=200, model_backend="direct")
