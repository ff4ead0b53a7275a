"""The tool-description fingerprint: one hash over the whole tool set and one per tool.

An evaluation run records it (from the agent's /v1/agent/info, or straight from the MCP server) so two
runs can tell whether the model saw the same tool descriptions, and which one changed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any, Protocol


class Described(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def input_schema(self) -> Mapping[str, Any]: ...


def _sha(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def tool_fingerprints(tools: Iterable[Described]) -> dict[str, Any]:
    """`tools_sha256` over the set (order-free), `tool_sha256` per tool, and the names in name order."""
    ordered = sorted(tools, key=lambda t: t.name)
    entries = [[t.name, t.description, dict(t.input_schema)] for t in ordered]
    return {
        "tools_sha256": _sha(entries),
        "tool_sha256": {entry[0]: _sha(entry) for entry in entries},
        "tools": [t.name for t in ordered],
    }
