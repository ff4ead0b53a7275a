"""What the agent knows of one MCP tool: its schema (offered to the model, checked before a call), how the audit
log treats its arguments, and what a call returned. No network: agent.mcp_client fills these in."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jsonschema

AUDIT_META = "local-agent/audit"  # where a tool declares its personal-data and free-text arguments


@dataclass(frozen=True)
class ArgumentRules:
    """How the audit log treats a tool's arguments, as the MCP server declares it with the tool."""

    personal: frozenset[str] = frozenset()  # customer names or IDs: pseudonymised, IDs indexed
    free_text: frozenset[str] = frozenset()  # note texts, search patterns: never logged verbatim

    @classmethod
    def from_meta(cls, meta: dict[str, Any] | None) -> ArgumentRules:
        declared = (meta or {}).get(AUDIT_META)
        if not isinstance(declared, dict):
            return cls()
        return cls(
            *(frozenset(str(a) for a in declared.get(k) or [] if isinstance(a, str)) for k in ("personal", "free_text"))
        )


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    input_schema: dict[str, Any]
    audit: ArgumentRules = ArgumentRules()

    def ollama(self) -> dict[str, Any]:
        """The tool as Ollama's `tools[]` entry."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.input_schema},
        }

    def validation_error(self, arguments: dict[str, Any]) -> str | None:
        """A short message if `arguments` break the tool's input schema, else None."""
        validator = jsonschema.Draft202012Validator(self.input_schema)
        errors = sorted(validator.iter_errors(arguments), key=lambda e: list(e.path))
        if not errors:
            return None
        return "; ".join(f"{'.'.join(map(str, e.path)) or 'arguments'}: {e.message}" for e in errors[:3])


@dataclass(frozen=True)
class ToolResult:
    is_error: bool
    text: str
    timed_out: bool = False  # the tool did not answer within TOOL_TIMEOUT_SECONDS (is_error is True too)
