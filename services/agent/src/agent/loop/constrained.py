"""Constrained tool calling (TOOL_CALLING=constrained): the model's decision asked through one JSON schema.

A decision round sends no `tools`; it sends a JSON schema the model server enforces while decoding (Ollama's
`format`, the OpenAI protocol's `response_format` json_schema), with one `anyOf` branch per offered tool and one
for answering:

    {"tool": "<a tool's name, as a const>", "arguments": {<that tool's own input schema>}}
    {"tool": "answer_directly"}

so a name the caller may not use, or arguments of another tool, cannot be written at all. The tool descriptions
reach the model as text in the system prompt (the chat template would put them there for `tools`; llama-server
refuses to mix `tools` with a schema of our own). The chosen call goes through the loop's ordinary checks
(authorization, schema, duplicates) as a native one would. The tool's name comes first, and answering is one
more named choice, described in the catalogue like a tool: asked {"decision": "answer"|"call", ...} instead,
Qwen2.5-Coder-1.5B answered every clock question itself with an invented time (docs/evaluation.md, "The decision
asked tool first"). "answer_directly" is followed by one free-text round without schema or tools, which streams as
usual, under its own prompt (agent.loop.prompt.answer_messages: the decision line, the catalogue and the history's
calls left out, plain language asked for); a call it still writes as text is recognised (agent.loop.textcall). A
reply that does not fit the schema means the server did not enforce it: InvalidDecision, and nothing runs.

With TOOL_DECISION=name_first the decision takes two smaller rounds instead of one: the first chooses among the
tool names (an `enum`) under a catalogue of one summary line per tool; the second, only when the chosen tool has
arguments, writes them under that tool's whole description and its own input schema. The first round's prompt is
a fraction of the whole catalogue (`scripts/bench-constrained` prints both), and it is the same for every
question, so a model server's prompt cache keeps it.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import structlog

from agent.backends.base import (
    ModelBackend,
    RoundDone,
    RoundRequest,
    TextDelta,
    ToolCall,
    ToolCallsDelta,
)
from agent.context import RequestContext
from agent.errors import DependencyDown, UpstreamError
from agent.loop.events import Usage
from agent.toolspec import ToolSpec

# The "tool" that means "answer the user yourself", offered and described like a tool, so that answering is one
# choice among the named ones (no tool may take this name: docs/tools.md).
ANSWER = "answer_directly"
ANSWER_DESCRIPTION = (
    "Answer the user yourself, without a tool: greetings, general knowledge, translations, arithmetic on numbers "
    "the user gives, writing or explaining text or code, what a term means.\n"
    "Araçsız, kendin yanıtla: selamlaşma, genel bilgi, çeviri, kullanıcının verdiği sayılarla hesap, metin ya da kod "
    "yazma, bir terimin anlamı."
)
# What the schema means, in both languages the agent serves (the extra prompt tokens: scripts/bench-constrained).
DECISION_LINE = (
    f'Reply with one JSON object: {{"tool": NAME, "arguments": {{...}}}} to call one of the tools below, or '
    f'{{"tool": "{ANSWER}"}} to answer the user yourself.\n'
    "Tek bir JSON nesnesiyle yanıt ver: aşağıdaki araçlardan birini çağırmak için "
    f'{{"tool": AD, "arguments": {{...}}}}, kullanıcıyı kendin yanıtlamak için {{"tool": "{ANSWER}"}}.'
)
# TOOL_DECISION=name_first: the first round names a tool (or answers), the second writes that tool's arguments.
CHOICE_LINE = (
    f'Reply with one JSON object: {{"tool": NAME}} to call one of the tools below, or {{"tool": "{ANSWER}"}} to '
    "answer the user yourself. You do not know the date, the time or any of the company's figures: for those, call "
    "the tool whose line fits.\n"
    f'Tek bir JSON nesnesiyle yanıt ver: aşağıdaki araçlardan birini çağırmak için {{"tool": AD}}, kullanıcıyı '
    f'kendin yanıtlamak için {{"tool": "{ANSWER}"}}. Tarihi, saati ve şirketin rakamlarını bilmiyorsun: bunlar için '
    "satırı uyan aracı çağır."
)
ARGUMENTS_LINE = (
    "You call the tool {name} now. Reply with its arguments as one JSON object, taken from the user's question.\n"
    "Şimdi {name} aracını çağırıyorsun. Argümanlarını kullanıcının sorusundan alarak tek bir JSON nesnesiyle yaz."
)
SCHEMA_NAME = "decision"
log = structlog.get_logger("agent.loop.constrained")
# A decision must end inside its round: a string argument the tool leaves unbounded gets this many characters at
# most, and a decision round may take DECISION_MAX_TOKENS (over the longest decision the bounds allow), so a
# model that rambles inside a string is stopped by the grammar, never cut off by the token limit.
MAX_STRING = 200
DECISION_MAX_TOKENS = 1024


class InvalidDecision(UpstreamError):
    """The model server returned a decision outside the schema it was sent: it does not enforce the schema."""

    code = "invalid_decision"
    public = (
        "The model's reply did not fit the tool-decision schema (TOOL_CALLING=constrained), so nothing was run. "
        "The operator must use a model server that enforces JSON schemas (agent logs)."
    )


def arguments_schema(spec: ToolSpec) -> dict[str, Any]:
    """The tool's input schema as a branch (or a name-first decision's second round) can hold it. A `$ref` would
    point into our document, not the tool's: such a tool gets any object here, and its arguments are still checked
    against its schema before it runs."""
    schema = spec.input_schema
    if "$ref" in json.dumps(schema) or schema.get("type", "object") != "object":
        return {"type": "object"}
    props = {name: _bounded(prop) for name, prop in (schema.get("properties") or {}).items()}
    # No argument the tool does not declare (llama.cpp's grammar admits none either unless told otherwise).
    kept = {k: v for k, v in schema.items() if k not in ("title", "properties")}
    return {"additionalProperties": False, **kept, "properties": props}


def _bounded(prop: dict[str, Any]) -> dict[str, Any]:
    if prop.get("type") == "string" and "maxLength" not in prop and "enum" not in prop:
        return {**prop, "maxLength": MAX_STRING}
    return prop


def decision_schema(specs: list[ToolSpec]) -> dict[str, Any]:
    """One schema for the whole decision: answer, or exactly one of `specs` with its own arguments."""
    calls = [
        {
            "type": "object",
            "properties": {"tool": {"const": spec.name}, "arguments": arguments_schema(spec)},
            "required": ["tool", "arguments"],
            "additionalProperties": False,
        }
        for spec in specs
    ]
    return {"anyOf": [*calls, _tool({"const": ANSWER})]}


def _tool(name: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": {"tool": name}, "required": ["tool"], "additionalProperties": False}


def _argument_line(name: str, prop: dict[str, Any], required: bool) -> str:
    kind = prop.get("type", "any")
    extra = "required" if required else f"default {json.dumps(prop['default'])}" if "default" in prop else "optional"
    return f"  - {name} ({kind}, {extra}): {prop.get('description', '')}".rstrip(": ")


def catalogue(specs: list[ToolSpec]) -> str:
    """The offered tools as prompt text: name, description, arguments (what a chat template renders for tools)."""
    parts = ["Tools / Araçlar:"]
    for spec in specs:
        parts.append(f"### {spec.name}\n{spec.description.strip()}")
        props = spec.input_schema.get("properties") or {}
        required = set(spec.input_schema.get("required") or [])
        if props:
            parts.append("Arguments:\n" + "\n".join(_argument_line(n, p, n in required) for n, p in props.items()))
    return "\n".join(parts)


def system_prompt(base: str, specs: list[ToolSpec]) -> str:
    return f"{base}\n\n{DECISION_LINE}\n\n{catalogue(specs)}\n### {ANSWER}\n{ANSWER_DESCRIPTION}"


def choice_schema(specs: list[ToolSpec]) -> dict[str, Any]:
    """The first round of a name-first decision: one of `specs` by name (no arguments yet), or ANSWER."""
    return _tool({"enum": [*(spec.name for spec in specs), ANSWER]})


def summary(spec: ToolSpec) -> str:
    """A tool in one line for the name-first catalogue: its description's first line, and its example when it
    gives one (the shipped tools' bilingual `Example:` line: the Turkish way to ask, in a few tokens)."""
    lines = [line.strip() for line in spec.description.strip().splitlines() if line.strip()]
    example = next((line for line in lines[1:] if line.startswith("Example:")), "")
    return " ".join(part for part in (lines[0] if lines else "", example) if part)


def choice_prompt(base: str, specs: list[ToolSpec]) -> str:
    """The first round's system prompt: the choice line and one summary line per offered tool."""
    tools = "\n".join([*(f"- {spec.name}: {summary(spec)}" for spec in specs), f"- {ANSWER}: {ANSWER_DESCRIPTION}"])
    return f"{base}\n\n{CHOICE_LINE}\n\nTools / Araçlar:\n{tools}"


def arguments_prompt(base: str, spec: ToolSpec) -> str:
    """The second round's system prompt: the chosen tool alone, whole, and what to write."""
    return f"{base}\n\n{ARGUMENTS_LINE.format(name=spec.name)}\n\n{catalogue([spec])}"


def takes_arguments(spec: ToolSpec) -> bool:
    return bool(spec.input_schema.get("properties"))


def parse(text: str, schema: dict[str, Any], call_id: str, cut_off: bool) -> ToolCall | None:
    """The decision as a tool call (None: answer now); InvalidDecision when it does not fit the schema."""
    value = _json(text, cut_off, "decision does")
    problems = list(jsonschema.Draft202012Validator(schema).iter_errors(value))
    if problems:
        tool = value.get("tool") if isinstance(value, dict) else None
        raise InvalidDecision(
            f"The model's decision does not fit the schema sent (does the server enforce it?): tool {tool!r}, "
            f"{problems[0].message[:200]}"
        )
    if value["tool"] == ANSWER:
        return None
    return ToolCall(call_id, value["tool"], dict(value.get("arguments", {})))  # none yet in a name-first choice


def _json(text: str, cut_off: bool, what: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        why = "it was cut off by the token limit" if cut_off else f"it is not JSON ({exc})"
        raise InvalidDecision(f"The model's {what} not fit the schema: {why}: {text[:120]!r}") from exc


def parse_arguments(text: str, schema: dict[str, Any], tool: str, cut_off: bool) -> dict[str, Any]:
    """A name-first decision's second round: the chosen tool's arguments; InvalidDecision when off the schema."""
    value = _json(text, cut_off, f"arguments for {tool} do")
    problems = [] if not isinstance(value, dict) else list(jsonschema.Draft202012Validator(schema).iter_errors(value))
    if not isinstance(value, dict) or problems:
        why = problems[0].message[:200] if problems else "not a JSON object"
        raise InvalidDecision(f"The model's arguments for {tool} do not fit the schema sent: {why}")
    return value


async def decide(
    backend: ModelBackend, request: RoundRequest, usage: Usage, context: RequestContext
) -> ToolCall | None:
    """Run one decision round and return the chosen call, or None to answer."""
    assert request.schema is not None
    text, cut_off = await json_round(backend, request, usage, context)
    return parse(text, request.schema, f"call_{request.request_id or 'r'}_{request.round}", cut_off)


async def json_round(
    backend: ModelBackend, request: RoundRequest, usage: Usage, context: RequestContext
) -> tuple[str, bool]:
    """One round under `request.schema`: its text, and whether the token limit cut it. Nothing of it reaches the
    user, so a round the model server dropped (a connection closed under it: seen with llama-server on a loaded
    host) is asked once more instead of failing the request."""
    try:
        return await _json_round_once(backend, request, usage, context)
    except DependencyDown as exc:
        log.warning("decision_retried", error=exc.message)
        return await _json_round_once(backend, request, usage, context)


async def _json_round_once(
    backend: ModelBackend, request: RoundRequest, usage: Usage, context: RequestContext
) -> tuple[str, bool]:
    text, cut_off = "", False
    async for event in backend.stream_round(request, context):
        if isinstance(event, TextDelta):
            text += event.text
        elif isinstance(event, ToolCallsDelta):  # native calls although no tools were sent: not our schema
            names = ", ".join(c.name for c in event.calls)
            raise InvalidDecision(f"The model server answered a decision round with native tool calls ({names})")
        elif isinstance(event, RoundDone):
            usage.prompt_tokens += event.prompt_tokens
            usage.completion_tokens += event.completion_tokens
            cut_off = event.done_reason == "length"
    return text, cut_off
