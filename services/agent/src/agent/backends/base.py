"""The one interface to the model: a round goes in, a stream of deltas, tool calls and usage comes out.

The direct backends (agent.backends.ollama, agent.backends.openai_compat) and the GPU queue backend
(agent.queue.client) implement ModelBackend; the tool loop only knows this module. Everything here is
JSON-able so a round and its events can cross Redis unchanged.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal, Protocol

from agent.context import RequestContext

Message = dict[str, Any]  # Ollama's message shape: role, content, thinking?, tool_calls?, tool_name?


def last_user_text(messages: object) -> str:
    """The last user message's text ("" when there is none, or it is not text): the question being asked. Takes a
    request body's `messages` as sent too (anything that is not a list of objects reads as no question)."""
    if not isinstance(messages, list):
        return ""
    users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    content = users[-1].get("content") if users else ""
    return content if isinstance(content, str) else ""


@dataclass(frozen=True)
class RoundRequest:
    model: str
    messages: list[Message]
    tools: list[dict[str, Any]] | None
    options: dict[str, Any]
    think: bool | str | None = None
    request_id: str = ""
    round: int = 1  # 1-based; rounds > 1 belong to conversations already under way
    priority: Literal["user", "task"] = "user"  # "task": a client background task, below every user round
    schema: dict[str, Any] | None = None  # a JSON schema the server must decode into (TOOL_CALLING=constrained)
    share: str = ""  # whose turn this round is (the caller's fair-share key, MAX_ROUNDS_PER_USER); "": nobody's

    def ollama_body(self) -> dict[str, Any]:
        """The /api/chat body for this round (always streaming; `think` only when set)."""
        body: dict[str, Any] = {"model": self.model, "messages": self.messages, "stream": True, "options": self.options}
        if self.tools:
            body["tools"] = self.tools
        if self.think is not None:
            body["think"] = self.think
        if self.schema is not None:
            body["format"] = self.schema
        return body

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RoundRequest:
        return cls(**data)


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any]
    invalid: str | None = None  # why the call cannot run (e.g. cut-off JSON arguments): never executed


@dataclass(frozen=True)
class TextDelta:
    text: str
    kind: Literal["text"] = "text"


@dataclass(frozen=True)
class ThinkingDelta:
    text: str
    kind: Literal["thinking"] = "thinking"


@dataclass(frozen=True)
class ToolCallsDelta:
    calls: list[ToolCall]
    kind: Literal["tool_calls"] = "tool_calls"


@dataclass(frozen=True)
class RoundDone:
    done_reason: str = "stop"
    prompt_tokens: int = 0
    completion_tokens: int = 0
    time_to_first_token_s: float | None = None
    kind: Literal["done"] = "done"


RoundEvent = TextDelta | ThinkingDelta | ToolCallsDelta | RoundDone


_DONE_FIELDS = {f.name for f in fields(RoundDone)} - {"kind"}


def event_to_dict(event: RoundEvent) -> dict[str, Any]:
    return asdict(event)


def event_from_dict(data: dict[str, Any]) -> RoundEvent:
    kind = data.get("kind")
    payload = {k: v for k, v in data.items() if k != "kind"}
    if kind == "text":
        return TextDelta(**payload)
    if kind == "thinking":
        return ThinkingDelta(**payload)
    if kind == "tool_calls":
        return ToolCallsDelta([ToolCall(**c) for c in payload["calls"]])
    if kind == "done":  # fields a worker of another release adds are dropped, not a crash of the API
        return RoundDone(**{k: v for k, v in payload.items() if k in _DONE_FIELDS})
    raise ValueError(f"unknown round event kind {kind!r}")


@dataclass
class ModelStatus:
    """What /readyz and error messages say about the model runtime."""

    reachable: bool
    models: list[str] = field(default_factory=list)
    version: str | None = None
    detail: str = ""
    engine: str = ""  # what serves the rounds, for reports: "Ollama 0.31.2", "llamacpp (OpenAI protocol)"
    scripted: bool = False  # a test stand-in (tests/fakes) that replays a script: its answers measure no model


class ModelBackend(Protocol):
    def stream_round(self, request: RoundRequest, context: RequestContext | None = None) -> AsyncIterator[RoundEvent]:
        """Run one round of the request `context` (None: of no request); raise an AgentError subclass
        (DependencyDown, ModelNotFound, …) on failure. The queue backend notes in `context` who ran the round."""
        ...

    async def status(self) -> ModelStatus: ...

    async def aclose(self) -> None: ...
