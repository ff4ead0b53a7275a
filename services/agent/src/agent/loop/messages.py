"""Client conversations (OpenAI or Ollama flavour) normalized into the Ollama message shape the loop uses.

Rules (docs/architecture.md, "One request"): client system/developer messages are dropped unless
KEEP_CLIENT_SYSTEM (then kept, after ours); IDE wrappers such as <userRequest>…</userRequest> are unwrapped;
content-part arrays are flattened to text; OpenAI tool_call_id / JSON-string arguments become Ollama
tool_name / object arguments; our own "Tools used" footer is cut from assistant messages.
"""

from __future__ import annotations

import re
from typing import Any

from agent import jsoncheck
from agent.backends.base import Message
from agent.errors import BadRequest

ROLES = {"system", "developer", "user", "assistant", "tool", "function"}
# The agent's own "Tools used" footer (loop.engine.footer) as a client sends it back in the history: the
# model would learn to write it itself, so it is cut from assistant messages.
FOOTER = re.compile(r"\s*\n---\nTools used: [^\n]*\s*$")
WRAPPERS = re.compile(
    r"^\s*<(userRequest|user_request|user_query|userQuery|prompt)>\s*(.*?)\s*</\1>\s*$", re.DOTALL | re.IGNORECASE
)


def flatten(content: Any, where: str) -> str:
    """A string, null, or an array of content parts (text kept, images and files refused clearly)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, dict) and part.get("type") in ("text", "input_text", "refusal"):
                texts.append(str(part.get("text", part.get("refusal", ""))))
            elif isinstance(part, dict):
                raise BadRequest(
                    f"{where}: content part of type {part.get('type')!r} is not supported; "
                    "this agent accepts text only",
                    param=where,
                )
            else:
                raise BadRequest(f"{where}: content parts must be objects", param=where)
        return "\n".join(t for t in texts if t)
    raise BadRequest(f"{where}: content must be a string or an array of parts", param=where)


def unwrap(text: str) -> str:
    match = WRAPPERS.match(text)
    return match.group(2) if match else text


def _arguments(raw: Any, where: str) -> dict[str, Any]:
    if raw is None or raw == "":
        return {}
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str):
        parsed = jsoncheck.loads(raw, f"{where}: tool call arguments")
        if isinstance(parsed, dict):
            return parsed
    raise BadRequest(f"{where}: tool call arguments must be a JSON object", param=where)


def _tool_calls(raw: Any, where: str) -> list[dict[str, Any]]:
    if not isinstance(raw, list):
        raise BadRequest(f"{where}.tool_calls must be an array", param=where)
    calls = []
    for i, call in enumerate(raw):
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
            raise BadRequest(f"{where}.tool_calls[{i}] needs function.name (a string)", param=where)
        entry: dict[str, Any] = {
            "function": {"index": i, "name": fn["name"], "arguments": _arguments(fn.get("arguments"), where)}
        }
        if call.get("id") is not None and not isinstance(call["id"], str):
            raise BadRequest(f"{where}.tool_calls[{i}].id must be a string", param=where)
        if call.get("id"):
            entry["id"] = call["id"]
        calls.append(entry)
    return calls


def normalize(raw_messages: Any, keep_client_system: bool) -> list[Message]:
    """Validate and convert a client's `messages` array; the result holds no system message of ours yet."""
    if not isinstance(raw_messages, list) or not raw_messages:
        raise BadRequest("`messages` must be a non-empty array", param="messages")
    out: list[Message] = []
    names_by_id: dict[str, str] = {}
    for i, msg in enumerate(raw_messages):
        where = f"messages[{i}]"
        if not isinstance(msg, dict):
            raise BadRequest(f"{where} must be an object", param=where)
        role = str(msg.get("role", "")).lower()
        if role not in ROLES:
            raise BadRequest(
                f"{where}.role {msg.get('role')!r} is not one of system, developer, user, assistant, tool", param=where
            )
        text = flatten(msg.get("content"), where)
        if role in ("system", "developer"):
            if keep_client_system and text.strip():
                out.append({"role": "system", "content": text})
            continue
        if role == "user":
            out.append({"role": "user", "content": unwrap(text)})
        elif role == "assistant":
            entry: Message = {"role": "assistant", "content": FOOTER.sub("", text)}
            if msg.get("tool_calls"):
                entry["tool_calls"] = _tool_calls(msg["tool_calls"], where)
                for call in entry["tool_calls"]:
                    if "id" in call:
                        names_by_id[call["id"]] = call["function"]["name"]
            out.append(entry)
        else:  # tool / function results
            name = _text_field(msg, ("tool_name", "name"), where) or names_by_id.get(
                _text_field(msg, ("tool_call_id",), where) or ""
            )
            entry = {"role": "tool", "content": text}
            if name:
                entry["tool_name"] = name
            out.append(entry)
    if not any(m["role"] == "user" for m in out):
        raise BadRequest("the conversation has no user message", param="messages")
    return out


def _text_field(msg: dict[str, Any], keys: tuple[str, ...], where: str) -> str | None:
    """The first of `keys` that is set; a non-string there (an object as an id) is a 400."""
    for key in keys:
        value = msg.get(key)
        if value is None or value == "":
            continue
        if not isinstance(value, str):
            raise BadRequest(f"{where}.{key} must be a string", param=where)
        return value
    return None
