"""A tool call the model wrote as text instead of through the protocol, recognised only when it is nothing else.

Qwen2.5-Coder, asked natively, writes its call as a fenced ```json {"name": ..., "arguments": ...}``` block instead
of its template's <tool_call> tags, so the engine parses no call (issue 37). A round's whole text is taken as such a
call only when, once trimmed, it is exactly one JSON object (bare, or alone in one ```json fence) whose "name"
(or, as a constrained decision written out, "tool") is one of the tools offered in that round and whose "arguments"
are an object its schema accepts. Anything else (JSON inside prose, a tool not offered, arguments the schema refuses,
two objects) stays plain text: a guess is never run. A recognised call then takes the loop's ordinary path
(authorization, schema, duplicates, timeout, audit) like a native one.

While a round's text could still become such a call (it opens with `{` or a ```json fence) the loop holds it back
instead of streaming it (`could_be_call`), so the user never sees a call that is then run.
"""

from __future__ import annotations

import json
import re
from typing import Any

from agent.backends.base import ToolCall
from agent.toolspec import ToolSpec

_FENCE = re.compile(r"```(?:json)?[ \t]*\n(?P<body>.*?)\n?[ \t]*```", re.DOTALL)
_FENCE_OPENERS = ("", "j", "js", "jso", "json")


def could_be_call(text: str) -> bool:
    """True while the text so far may still turn out to be a call written as text (so it must not stream yet)."""
    head = text.lstrip()
    if not head or head.startswith("{"):
        return True
    if not head.startswith("```"):
        return False
    first_line, newline, _ = head[3:].partition("\n")
    label = first_line.strip().lower()
    return label in ("", "json") if newline else label in _FENCE_OPENERS


def _json_object(text: str) -> dict[str, Any] | None:
    body = text.strip()
    fenced = _FENCE.fullmatch(body)
    if fenced:
        body = fenced.group("body").strip()
    if not body.startswith("{"):
        return None
    try:
        value = json.loads(body)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def parse_text_call(text: str, offered: list[ToolSpec], call_id: str) -> ToolCall | None:
    """The call `text` is, if it is wholly one call of an offered tool with schema-valid arguments; else None."""
    value = _json_object(text)
    if value is None:
        return None
    name = value.get("name", value.get("tool"))
    arguments = value.get("arguments", {})
    if not isinstance(name, str) or not isinstance(arguments, dict):
        return None
    if set(value) - {"name", "tool", "arguments"}:
        return None  # an object with other keys is data the model wrote, not a call
    spec = next((s for s in offered if s.name == name), None)
    if spec is None or spec.validation_error(arguments) is not None:
        return None
    return ToolCall(call_id, name, dict(arguments))
