"""Prometheus metrics of the tool server, in a registry per app (so tests can build many apps)."""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Histogram

# Tool calls range from sub-millisecond lookups to slow reports on a busy database.
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)


@dataclass
class Metrics:
    registry: CollectorRegistry = field(default_factory=lambda: CollectorRegistry(auto_describe=True))

    def __post_init__(self) -> None:
        self.tool_calls = Counter(
            "mcp_tool_calls_total",
            "Tool calls by tool and outcome (ok, tool_error, error, unknown_tool).",
            ["tool", "outcome"],
            registry=self.registry,
        )
        self.tool_duration = Histogram(
            "mcp_tool_duration_seconds", "Tool call duration.", ["tool"], buckets=BUCKETS, registry=self.registry
        )
        self.rejected = Counter(
            "mcp_requests_rejected_total",
            "HTTP requests refused before reaching MCP (reason: unauthorized).",
            ["reason"],
            registry=self.registry,
        )
