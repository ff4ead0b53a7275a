"""Names both services put on metrics and log lines: tool-call outcomes, the unknown-tool label, the event.

A tool name the model invented becomes the label `unknown` (never the invented name: label values must
stay a bounded set). Both services log one `tool_called` line per call with `tool`, `outcome` and
`duration_ms`.
"""

from __future__ import annotations

from typing import Final, Literal

UNKNOWN_TOOL: Final = "unknown"
TOOL_CALLED: Final = "tool_called"

# How the agent's tool loop ended a call the model asked for (agent_tool_calls_total{outcome}).
AgentToolOutcome = Literal[
    "ok", "error", "timeout", "unknown_tool", "forbidden", "invalid_arguments", "duplicate", "failed_before"
]
# How the MCP server ended a call it received (mcp_tool_calls_total{outcome}).
ServerToolOutcome = Literal["ok", "tool_error", "error", "unknown_tool", "forbidden"]


def tool_label(name: str, known: bool) -> str:
    """The metric label for a tool: its name if the server has it, else UNKNOWN_TOOL."""
    return name if known else UNKNOWN_TOOL


def duration_ms(seconds: float) -> float:
    """Durations in log lines: milliseconds, two decimals."""
    return round(seconds * 1000, 2)
