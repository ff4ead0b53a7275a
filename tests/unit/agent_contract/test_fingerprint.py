"""The tool fingerprint: order-free over the set, per tool, and changed by any description edit."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agent_contract.fingerprint import tool_fingerprints


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    input_schema: dict[str, Any] = field(default_factory=dict)


def test_the_set_hash_ignores_listing_order_and_names_come_sorted() -> None:
    a, b = Tool("b_tool", "does b"), Tool("a_tool", "does a", {"type": "object"})
    first, second = tool_fingerprints([a, b]), tool_fingerprints([b, a])
    assert first == second
    assert first["tools"] == ["a_tool", "b_tool"]


def test_a_changed_description_changes_its_own_hash_and_the_sets_only() -> None:
    before = tool_fingerprints([Tool("a", "x"), Tool("b", "y")])
    after = tool_fingerprints([Tool("a", "x"), Tool("b", "y!")])
    assert before["tools_sha256"] != after["tools_sha256"]
    assert before["tool_sha256"]["a"] == after["tool_sha256"]["a"]
    assert before["tool_sha256"]["b"] != after["tool_sha256"]["b"]
