"""What the tool loop yields and records: its events, the trace of tool calls, who asks, token usage.

The engine (agent.loop.engine) produces these; the OpenAI and Ollama renderers and the audit trail (agent.api)
only read them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from agent.backends.base import ToolCall
from agent_contract.headers import Caller as Identity
from agent_contract.labels import AgentToolOutcome

Outcome = AgentToolOutcome
EXECUTED: frozenset[str] = frozenset({"ok", "error", "timeout"})  # the tool ran (its result is real data)


@dataclass(frozen=True)
class TraceEntry:
    """One tool call the model asked for and what became of it: the trace in answers and audit records."""

    name: str
    arguments: dict[str, Any]
    outcome: Outcome
    round: int
    result_chars: int

    @property
    def executed(self) -> bool:
        return self.outcome in EXECUTED

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def tools_used(trace: list[TraceEntry]) -> list[str]:
    """Names of the tools that ran, in first-use order."""
    return list(dict.fromkeys(t.name for t in trace if t.executed))


@dataclass(frozen=True)
class Caller(Identity):
    """Who asks: the identity the MCP server is told (agent_contract's Caller, one type for both services) plus
    the policy's check for that role; the tool list is built from `may_use` before the model sees anything."""

    user: str = "anonymous"
    role: str = "admin"
    may_use: Callable[[str], bool] = field(default=lambda name: True, compare=False)
    share: str = ""  # the caller's fair-share key in the GPU queue (the rate limit's key); "": no user to share with


@dataclass(frozen=True)
class TextEvent:
    text: str


@dataclass(frozen=True)
class ThinkingEvent:
    text: str


@dataclass(frozen=True)
class ToolCallEvent:
    call: ToolCall
    round: int


@dataclass(frozen=True)
class ToolResultEvent:
    call: ToolCall
    outcome: Outcome
    content: str


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class FinalEvent:
    answer: str  # the whole answer text, footer included, exactly what was streamed
    finish_reason: str
    usage: Usage
    rounds: int
    trace: list[TraceEntry]
    grounding: dict[str, Any] | None = None  # agent.checks.mode: the verdict on the answer's figures
    retrieval: dict[str, Any] | None = None  # agent.loop.retrieval: which tools were offered, and why

    @property
    def tools_used(self) -> list[str]:
        return tools_used(self.trace)


LoopEvent = TextEvent | ThinkingEvent | ToolCallEvent | ToolResultEvent | FinalEvent


def footer(tools_used: list[str]) -> str:
    return f"\n\n---\nTools used: {', '.join(tools_used)}" if tools_used else ""
