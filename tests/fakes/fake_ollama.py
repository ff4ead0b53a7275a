"""Scripted Ollama for tests: speaks Ollama's real HTTP wire protocol, answers from per-test scripts.

No model weights can be had on these machines, so this is the only fake in the test suite. It reproduces
the *protocol* of `ollama serve` (NDJSON streaming of `/api/chat`, `thinking` deltas, whole `tool_calls` with
`index` and `id`, `done_reason`, metrics in nanoseconds, errors before and after the first byte, client
disconnect = cancellation) and records what it was asked, including the peak number of generations that
ran at the same time. Its replies are scripted: nothing it says is ever a measure of model accuracy.

Standalone on purpose (only starlette + uvicorn, no imports from the repository) so the same file runs in a
tiny container: `python fake_ollama.py --host 0.0.0.0 --port 11434 [--script FILE] [--models a,b]`.
It is one file, longer than our usual 300 lines, because the image copies only this file.
Script format: see tests/fakes/README.md.
"""

from __future__ import annotations

import argparse
import copy
import datetime as dt
import hashlib
import json
import random
import re
import string
import time
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import anyio

try:  # optional: the container image has only starlette + uvicorn; then `format` is checked as JSON only
    import jsonschema
except ImportError:  # pragma: no cover
    jsonschema = None  # type: ignore[assignment]
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

Json = dict[str, Any]

VERSION = "0.33.0-fake"
DEFAULT_MODELS = ("qwen3:4b", "qwen2.5:3b")
GREETING = "Hello! I am the scripted model."
TOOL_ECHO = "According to the tool: {tool_result}"
WHEN_KEYS = {"user_contains", "last_role", "tool_result_contains", "has_tools", "has_format", "model", "round"}
REPLY_KEYS = {
    "content",
    "thinking",
    "raw_content",
    "tool_calls",
    "tool_calls_on_done",
    "done_reason",
    "error",
    "stream_error",
    "token_delay",
    "first_token_delay",
    "tokens",
    "hang",
    "ignores_format",
}
SCRIPT_KEYS = {"rules", "default", "token_delay", "first_token_delay", "batch_exponent", "models"}
THINK_LEVELS = {"low", "medium", "high", "max"}
_TOKEN_RE = re.compile(r"\s+|\S+\s*")
LOAD_NS = 1_000_000  # the model is always "already loaded"
_MODIFIED_AT = "2026-01-01T00:00:00.000000000Z"
RAW_LINE = "_raw_line"  # a chunk sent verbatim (stream_error.line), never as JSON


class ScriptError(ValueError):
    """A script posted to /_fake/script (or given with --script) is malformed."""


# ---------------------------------------------------------------- models


@dataclass(frozen=True)
class ModelCard:
    """What /api/tags, /api/show and the capability checks know about one configured model name."""

    name: str
    family: str
    arch: str
    parameter_size: str
    context_length: int
    capabilities: tuple[str, ...]

    @classmethod
    def for_name(cls, name: str) -> ModelCard:
        base, _, tag = name.partition(":")
        size = tag.rstrip("bB").upper() + "B" if tag[:1].isdigit() else "3.0B"
        if base.startswith(("qwen3", "deepseek-r1")):  # the families Ollama parses <think> for
            return cls(name, "qwen3", "qwen3", size, 40960, ("completion", "tools", "thinking"))
        if base.startswith("qwen2"):
            return cls(name, "qwen2", "qwen2", size, 32768, ("completion", "tools"))
        return cls(name, "llama", "llama", size, 131072, ("completion", "tools"))

    @property
    def thinks(self) -> bool:
        return "thinking" in self.capabilities

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.name.encode()).hexdigest()

    def details(self) -> Json:
        return {
            "parent_model": "",
            "format": "gguf",
            "family": self.family,
            "families": [self.family],
            "parameter_size": self.parameter_size,
            "quantization_level": "Q4_K_M",
        }

    def tag_entry(self) -> Json:
        return {
            "name": self.name,
            "model": self.name,
            "modified_at": _MODIFIED_AT,
            "size": 2_019_393_189,
            "digest": self.digest,
            "details": self.details(),
        }


def _full_name(name: str) -> str:
    return name if ":" in name else f"{name}:latest"


# ---------------------------------------------------------------- state


@dataclass
class Behaviour:
    """The scriptable part of the fake: replaced by /_fake/script, restored by /_fake/reset."""

    rules: list[Json] = field(default_factory=list)
    default: Json | None = None
    token_delay: float = 0.0
    first_token_delay: float = 0.0
    batch_exponent: float = 0.0  # token_delay x (generations running) ** this: 0 = free batching, 1 = none
    models: list[str] = field(default_factory=lambda: list(DEFAULT_MODELS))


@dataclass
class FakeState:
    """Behaviour plus what happened: recorded /api/chat requests and concurrency statistics."""

    baseline: Behaviour = field(default_factory=Behaviour)
    behaviour: Behaviour = field(init=False)
    requests: list[Json] = field(default_factory=list)
    rule_uses: dict[int, int] = field(default_factory=dict)
    loaded: set[str] = field(default_factory=set)
    active: int = 0
    peak: int = 0
    chats: int = 0
    cancelled: int = 0
    generations: int = 0

    def __post_init__(self) -> None:
        self.behaviour = copy.deepcopy(self.baseline)

    def configure(self, script: Json) -> None:
        """Replace the behaviour by the baseline overlaid with `script` (same JSON as /_fake/script)."""
        self.behaviour = apply_script(self.baseline, script)
        self.rule_uses.clear()

    def reset(self) -> None:
        self.behaviour = copy.deepcopy(self.baseline)
        self.requests.clear()
        self.rule_uses.clear()
        self.loaded.clear()
        self.active = self.peak = self.chats = self.cancelled = self.generations = 0

    def card(self, name: str) -> ModelCard | None:
        models = self.behaviour.models
        for candidate in (name, _full_name(name)):
            if candidate in models:
                return ModelCard.for_name(candidate)
        return None

    def stats(self) -> Json:
        return {
            "active": self.active,
            "peak": self.peak,
            "chats": self.chats,
            "cancelled": self.cancelled,
            "generations": self.generations,
        }

    def begin(self) -> None:
        self.generations += 1
        self.active += 1
        self.peak = max(self.peak, self.active)

    def end(self, record: Json, outcome: str) -> None:
        self.active -= 1
        self.cancelled += outcome == "cancelled"
        record.update(ended_at=time.time(), outcome=outcome)


def _check_keys(obj: Any, allowed: set[str], what: str) -> Json:
    if not isinstance(obj, dict):
        raise ScriptError(f"{what} must be an object")
    unknown = set(obj) - allowed
    if unknown:
        raise ScriptError(f"unknown {what} keys {sorted(unknown)}; allowed: {sorted(allowed)}")
    return obj


def _check_reply(reply: Any, what: str) -> Json:
    _check_keys(reply, REPLY_KEYS, what)
    for call in reply.get("tool_calls") or []:
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            raise ScriptError(f"{what}.tool_calls entries need a string 'name'")
        if not isinstance(call.get("arguments", {}), dict):
            raise ScriptError(f"{what}.tool_calls arguments must be an object (Ollama sends objects)")
    if "tokens" in reply and not all(isinstance(t, str) for t in reply["tokens"]):
        raise ScriptError(f"{what}.tokens must be a list of strings")
    hang = reply.get("hang")
    if hang is not None and hang != "before_headers" and not (isinstance(hang, dict) and set(hang) == {"after_tokens"}):
        raise ScriptError(f'{what}.hang must be "before_headers" or {{"after_tokens": n}}')
    return dict(reply)


def apply_script(baseline: Behaviour, script: Any) -> Behaviour:
    """Validate a script and return the baseline behaviour with the script's fields replaced."""
    _check_keys(script, SCRIPT_KEYS, "script")
    new = copy.deepcopy(baseline)
    if "rules" in script:
        if not isinstance(script["rules"], list):
            raise ScriptError("rules must be a list")
        for i, rule in enumerate(script["rules"]):
            _check_keys(rule, {"when", "reply", "times"}, f"rules[{i}]")
            _check_keys(rule.get("when", {}), WHEN_KEYS, f"rules[{i}].when")
            _check_reply(rule.get("reply", {}), f"rules[{i}].reply")
        new.rules = copy.deepcopy(script["rules"])
    if "default" in script:
        default = script["default"]
        new.default = None if default is None else _check_reply(default, "default")
    for key in ("token_delay", "first_token_delay", "batch_exponent"):
        if key in script:
            setattr(new, key, float(script[key]))
    if "models" in script:
        new.models = [_full_name(str(m)) for m in script["models"]]
    return new


# ---------------------------------------------------------------- matching and planning


@dataclass
class Conversation:
    """The facts of one /api/chat request that rules can match on."""

    model: str
    last_user: str
    last_tool: str | None
    last_role: str
    has_tools: bool
    has_format: bool
    round: int

    @classmethod
    def of(cls, body: Json) -> Conversation:
        messages = body.get("messages") or []

        def last(role: str) -> str | None:
            found = (str(m.get("content") or "") for m in reversed(messages) if m.get("role") == role)
            return next(found, None)

        return cls(
            model=str(body.get("model")),
            last_user=last("user") or "",
            last_tool=last("tool"),
            last_role=str(messages[-1].get("role")) if messages else "",
            has_tools=bool(body.get("tools")),
            has_format=body.get("format") not in (None, ""),
            round=1 + sum(m.get("role") == "assistant" for m in messages),
        )

    def matches(self, when: Json) -> bool:
        checks: dict[str, Callable[[Any], bool]] = {
            "user_contains": lambda v: str(v).lower() in self.last_user.lower(),
            "last_role": lambda v: v == self.last_role,
            "tool_result_contains": lambda v: self.last_tool is not None and str(v).lower() in self.last_tool.lower(),
            "has_tools": lambda v: bool(v) == self.has_tools,
            "has_format": lambda v: bool(v) == self.has_format,
            "model": lambda v: _full_name(str(v)) == _full_name(self.model),
            "round": lambda v: int(v) == self.round,
        }
        return all(checks[key](value) for key, value in when.items())

    def render(self, text: str) -> str:
        return text.replace("{tool_result}", (self.last_tool or "")[:300]).replace("{user}", self.last_user)


def choose_reply(state: FakeState, convo: Conversation) -> tuple[int | None, Json]:
    """First matching rule whose `times` is not used up wins; else the default reply."""
    for i, rule in enumerate(state.behaviour.rules):
        times = rule.get("times")
        if times is not None and state.rule_uses.get(i, 0) >= times:
            continue
        if convo.matches(rule.get("when", {})):
            state.rule_uses[i] = state.rule_uses.get(i, 0) + 1
            return i, rule.get("reply", {})
    if state.behaviour.default is not None:
        return None, state.behaviour.default
    return None, {"content": TOOL_ECHO if convo.last_role == "tool" else GREETING}


def split_tokens(text: str) -> list[str]:
    """Words with their trailing whitespace: close enough to a tokenizer for streaming tests."""
    return _TOKEN_RE.findall(text)


def _call_id() -> str:
    return "call_" + "".join(random.choices(string.ascii_lowercase + string.digits, k=8))


@dataclass
class Plan:
    """Everything one generation will emit, decided before the first byte."""

    steps: list[tuple[str, Any]]  # ("thinking"|"content", text) or ("tool_call", whole call object)
    tool_calls_on_done: bool
    done_reason: str
    token_delay: float
    first_token_delay: float
    stream_error: Json | None
    batch_exponent: float = 0.0
    hang: Any = None  # "before_headers" or {"after_tokens": n}: then nothing more until the client leaves


def make_plan(state: FakeState, reply: Json, convo: Conversation, think_on: bool, num_predict: int) -> Plan:
    steps: list[tuple[str, Any]] = []
    if think_on and reply.get("thinking"):
        steps += [("thinking", t) for t in split_tokens(convo.render(str(reply["thinking"])))]
    if reply.get("raw_content"):  # verbatim text, as a model whose <think> tags Ollama failed to parse
        steps += [("content", t) for t in split_tokens(convo.render(str(reply["raw_content"])))]
    content = convo.render(str(reply.get("content", "")))
    tokens = reply["tokens"] if "tokens" in reply else split_tokens(content)
    steps += [("content", t) for t in tokens]
    for i, call in enumerate(reply.get("tool_calls") or []):
        function = {"index": i, "name": call["name"], "arguments": call.get("arguments", {})}
        steps.append(("tool_call", {"id": call.get("id") or _call_id(), "function": function}))
    done_reason = str(reply.get("done_reason", "stop"))
    if 0 < num_predict < len(steps):  # Ollama stops at num_predict tokens and says so
        steps, done_reason = steps[:num_predict], "length"
    return Plan(
        steps=steps,
        tool_calls_on_done=bool(reply.get("tool_calls_on_done")),
        done_reason=done_reason,
        token_delay=float(reply.get("token_delay", state.behaviour.token_delay)),
        first_token_delay=float(reply.get("first_token_delay", state.behaviour.first_token_delay)),
        stream_error=reply.get("stream_error"),
        batch_exponent=state.behaviour.batch_exponent,
        hang=reply.get("hang"),
    )


# ---------------------------------------------------------------- generation


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _prompt_tokens(body: Json) -> int:
    words = sum(len(split_tokens(str(m.get("content") or ""))) + 4 for m in body.get("messages") or [])
    return words + len(split_tokens(json.dumps(body.get("tools") or [])))


class Generation:
    """Runs one plan, yielding Ollama chat chunks (the last one is the done chunk or an error line)."""

    def __init__(self, model: str, plan: Plan, body: Json, running: Callable[[], int] = lambda: 1) -> None:
        self.model, self.plan, self.body = model, plan, body
        self.running = running  # generations under way now: a batching server slows each a little
        self.outcome = "cancelled"  # until the last chunk is produced

    def token_delay(self) -> float:
        """Seconds before the next chunk: slower while other generations run, as a batching server is."""
        return float(self.plan.token_delay * max(1, self.running()) ** self.plan.batch_exponent)

    def chunk(self, done: bool, **message: Any) -> Json:
        return {
            "model": self.model,
            "created_at": _now(),
            "message": {"role": "assistant", "content": "", **message},
            "done": done,
        }

    async def chunks(self) -> AsyncIterator[Json]:
        start = time.perf_counter_ns()
        await anyio.sleep(self.plan.first_token_delay)
        first = time.perf_counter_ns()
        on_done: list[Json] = []
        error = self.plan.stream_error
        hang_at = int(self.plan.hang["after_tokens"]) if isinstance(self.plan.hang, dict) else None
        for n, (kind, value) in enumerate(self.plan.steps):
            if n == hang_at:  # a server stuck mid-answer: the connection stays open, nothing more comes
                await anyio.sleep_forever()
            if error is not None and n >= int(error.get("after_tokens", 0)):
                self.outcome = "error"
                yield _error_chunk(error)
                return
            if n:
                await anyio.sleep(self.token_delay())
            if kind == "tool_call" and self.plan.tool_calls_on_done:
                on_done.append(value)
            elif kind == "tool_call":
                yield self.chunk(False, tool_calls=[value])
            else:
                yield self.chunk(False, **{kind: value})
        if error is not None:  # after_tokens beyond the reply: fail right before the done chunk
            self.outcome = "error"
            yield _error_chunk(error)
            return
        self.outcome = "completed"
        yield self.done_chunk(on_done, start, first)

    def done_chunk(self, tool_calls: list[Json], start: int, first: int) -> Json:
        end = time.perf_counter_ns()
        final = self.chunk(True, **({"tool_calls": tool_calls} if tool_calls else {}))
        final.update(
            done_reason=self.plan.done_reason,
            total_duration=LOAD_NS + max(end - start, 1),
            load_duration=LOAD_NS,
            prompt_eval_count=_prompt_tokens(self.body),
            prompt_eval_duration=max(first - start, 1),
            eval_count=len(self.plan.steps),
            eval_duration=max(end - first, 1),
        )
        return final


def _error_chunk(error: Json) -> Json:
    """`{"error": message}`, or with `line` that text verbatim (a broken NDJSON line, not JSON at all)."""
    if "line" in error:
        return {RAW_LINE: str(error["line"])}
    return {"error": str(error.get("message", "stream error"))}


def merge_chunks(chunks: Iterable[Json]) -> Json:
    """Non-streaming reply: concatenated content/thinking and all tool calls, on the done chunk."""
    content, thinking, calls, final = [], [], [], {}
    for chunk in chunks:
        if "error" in chunk or RAW_LINE in chunk:
            return chunk
        message = chunk["message"]
        content.append(message.get("content", ""))
        thinking.append(message.get("thinking", ""))
        calls += message.get("tool_calls", [])
        final = chunk
    message = {"role": "assistant", "content": "".join(content)}
    if "".join(thinking):
        message["thinking"] = "".join(thinking)
    if calls:
        message["tool_calls"] = calls
    return {**final, "message": message}


class GenerationResponse(Response):
    """Streams (NDJSON) or collects one generation while watching for the client going away.

    Real Ollama cancels generation when the request context ends; the fake does the same, so a cancelled
    request stops counting as active at once and "never two generations at once" can be measured.
    """

    def __init__(self, state: FakeState, record: Json, generation: Generation, stream: bool) -> None:
        self.status_code, self.background = 200, None
        self.state, self.record, self.generation, self.stream = state, record, generation, stream
        self._ended = False

    def _end(self) -> None:
        """The generation is over: it stops counting as active (and its ended_at is taken) once."""
        if not self._ended:
            self._ended = True
            self.state.end(self.record, self.generation.outcome)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.state.begin()
        try:
            async with anyio.create_task_group() as group:

                async def body() -> None:
                    await self._send_body(send)
                    group.cancel_scope.cancel()

                group.start_soon(body)
                while (await receive())["type"] != "http.disconnect":
                    pass
                group.cancel_scope.cancel()
        except OSError:  # the socket went away while sending
            pass
        finally:
            self._end()  # cancelled (client gone), or already ended with its last chunk

    async def _send_body(self, send: Send) -> None:
        # As in Ollama, the model is free once it produced the last chunk: the generation ends there, not after
        # the response's clean-up, which a fast client's next request could overtake (peak 2 with one client at a
        # time, seen in scripts/bench-queue's direct calls).
        if self.generation.plan.hang == "before_headers":  # a server that accepted the request and never answers
            await anyio.sleep_forever()
        if not self.stream:
            merged = merge_chunks([c async for c in self.generation.chunks()])
            self._end()
            self.status_code = 500 if "error" in merged or RAW_LINE in merged else 200
            payload = _dumps(merged)
            await send(_start(self.status_code, "application/json; charset=utf-8", len(payload)))
            await send({"type": "http.response.body", "body": payload})
            return
        await send(_start(200, "application/x-ndjson", None))
        async for chunk in self.generation.chunks():
            if self.generation.outcome != "cancelled":  # set just before the last chunk (done or error)
                self._end()
            line = _dumps(chunk) + b"\n"
            await send({"type": "http.response.body", "body": line, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def _dumps(obj: Json) -> bytes:
    if RAW_LINE in obj:
        return str(obj[RAW_LINE]).encode()
    return json.dumps(obj, separators=(",", ":")).encode()  # compact, like Go's encoder


def _start(status: int, content_type: str, length: int | None) -> Message:
    headers = [(b"content-type", content_type.encode())]
    if length is not None:  # streamed replies go out chunked, as Ollama's do
        headers.append((b"content-length", str(length).encode()))
    return {"type": "http.response.start", "status": status, "headers": headers}


# ---------------------------------------------------------------- HTTP endpoints


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


async def _read_json(request: Request) -> Json | JSONResponse:
    raw = await request.body()
    if not raw:
        return _error(400, "missing request body")
    try:
        body = json.loads(raw)
    except json.JSONDecodeError as exc:
        return _error(400, f"invalid character in request body: {exc}")
    return body if isinstance(body, dict) else _error(400, "request body must be a JSON object")


def _think_on(body: Json, card: ModelCard) -> bool | JSONResponse:
    """Ollama: think unset means ON for thinking models; asking a non-thinking model to think is a 400."""
    think = body.get("think")
    if isinstance(think, str) and think not in THINK_LEVELS:
        return _error(400, f'invalid think value: "{think}" (want a bool, "low", "medium", "high" or "max")')
    if think is None:
        return card.thinks
    if think is not False and not card.thinks:
        return _error(400, f'"{body["model"]}" does not support thinking')
    return think is not False


async def chat(request: Request) -> Response:
    state: FakeState = request.app.state.fake
    body = await _read_json(request)
    if isinstance(body, Response):
        return body
    state.chats += 1
    if not body.get("model"):
        return _error(400, "model is required")
    card = state.card(str(body["model"]))
    if card is None:
        return _error(404, f"model '{body['model']}' not found")
    messages = body.get("messages") or []
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        return _error(400, "json: cannot unmarshal messages: want a list of message objects")
    think_on = _think_on(body, card)
    if isinstance(think_on, Response):
        return think_on
    record = {**body, "started_at": time.time(), "ended_at": None, "outcome": None, "matched_rule": None}
    state.requests.append(record)
    if not body.get("messages"):
        return _load_reply(state, record, body, card)
    convo = Conversation.of(body)
    record["matched_rule"], reply = choose_reply(state, convo)
    if "error" in reply:  # before the first byte: a normal JSON error with the real status
        record.update(ended_at=time.time(), outcome="error")
        return _error(int(reply["error"].get("status", 500)), str(reply["error"].get("message", "error")))
    if (misfit := format_misfit(body.get("format"), reply, convo)) is not None:
        record.update(ended_at=time.time(), outcome="error")
        return _error(500, f"fake: the scripted reply cannot be produced under `format`: {misfit}")
    state.loaded.add(card.name)
    num_predict = int((body.get("options") or {}).get("num_predict") or -1)
    plan = make_plan(state, reply, convo, think_on, num_predict)
    generation = Generation(str(body["model"]), plan, body, lambda: state.active)
    return GenerationResponse(state, record, generation, stream=body.get("stream") is not False)


def format_misfit(fmt: Any, reply: Json, convo: Conversation) -> str | None:
    """Why Ollama could not have produced `reply` under `format` (its grammar admits only JSON fitting the schema),
    or None. A script that breaks it is a test mistake, answered with a loud 500; `ignores_format: true` plays a
    server that does not enforce the schema (to test what the client does with such output)."""
    if fmt in (None, "") or reply.get("ignores_format"):
        return None
    if reply.get("tool_calls") or reply.get("raw_content"):
        return "constrained output is content only (no tool calls, no raw text)"
    text = convo.render(str(reply.get("content", "")))
    try:
        value = json.loads(text)
    except ValueError as exc:
        return f"content is not JSON ({exc})"
    if isinstance(fmt, dict) and jsonschema is not None:
        problem = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(fmt).iter_errors(value))
        if problem is not None:
            return f"content does not fit the schema: {problem.message}"
    return None


def _load_reply(state: FakeState, record: Json, body: Json, card: ModelCard) -> JSONResponse:
    record.update(ended_at=time.time(), outcome="load")
    message = {"role": "assistant", "content": ""}
    return JSONResponse(
        {
            "model": body["model"],
            "created_at": _now(),
            "message": message,
            "done_reason": _load_or_unload(state, body, card),
            "done": True,
        }
    )


def _load_or_unload(state: FakeState, body: Json, card: ModelCard) -> str:
    """Empty messages/prompt load the model; with keep_alive 0 they unload it (Ollama's warm-up idiom)."""
    if body.get("keep_alive") in (0, "0", "0s", "0m"):
        state.loaded.discard(card.name)
        return "unload"
    state.loaded.add(card.name)
    return "load"


async def generate(request: Request) -> Response:
    """Minimal /api/generate: load/unload with an empty prompt, else the greeting in one chunk."""
    state: FakeState = request.app.state.fake
    body = await _read_json(request)
    if isinstance(body, Response):
        return body
    if not body.get("model"):
        return _error(400, "model is required")
    card = state.card(str(body["model"]))
    if card is None:
        return _error(404, f"model '{body['model']}' not found")
    base = {"model": body["model"], "created_at": _now()}
    if not body.get("prompt"):
        return JSONResponse({**base, "response": "", "done": True, "done_reason": _load_or_unload(state, body, card)})
    done = {**base, "response": GREETING, "done": True, "done_reason": "stop", "eval_count": 6}
    if body.get("stream") is not False:
        lines = [{**base, "response": GREETING, "done": False}, {**done, "response": ""}]
        return Response(b"".join(_dumps(x) + b"\n" for x in lines), media_type="application/x-ndjson")
    return JSONResponse(done)


async def show(request: Request) -> Response:
    state: FakeState = request.app.state.fake
    body = await _read_json(request)
    if isinstance(body, Response):
        return body
    name = str(body.get("model") or body.get("name") or "")
    card = state.card(name)
    if card is None:
        return _error(404, f"model '{name}' not found")
    info = {
        "general.architecture": card.arch,
        "general.parameter_count": 4_000_000_000,
        f"{card.arch}.context_length": card.context_length,
    }
    return JSONResponse(
        {
            "modelfile": f"FROM {card.name}\n",
            "parameters": "",
            "template": "{{ .Prompt }}",
            "details": card.details(),
            "model_info": info,
            "capabilities": list(card.capabilities),
            "modified_at": _MODIFIED_AT,
        }
    )


async def tags(request: Request) -> Response:
    state: FakeState = request.app.state.fake
    return JSONResponse({"models": [ModelCard.for_name(m).tag_entry() for m in state.behaviour.models]})


async def ps(request: Request) -> Response:
    state: FakeState = request.app.state.fake
    expires = (dt.datetime.now(dt.UTC) + dt.timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    models = [
        {**ModelCard.for_name(m).tag_entry(), "expires_at": expires, "size_vram": 2_019_393_189, "context_length": 4096}
        for m in sorted(state.loaded)
    ]
    return JSONResponse({"models": models})


async def script(request: Request) -> Response:
    state: FakeState = request.app.state.fake
    body = await _read_json(request)
    if isinstance(body, Response):
        return body
    try:
        state.configure(body)
    except (ScriptError, TypeError, ValueError) as exc:
        return _error(400, str(exc))
    return JSONResponse({"ok": True, "rules": len(state.behaviour.rules), "models": state.behaviour.models})


async def reset(request: Request) -> Response:
    request.app.state.fake.reset()
    return JSONResponse({"ok": True})


def create_app(state: FakeState | None = None) -> Starlette:
    """The fake as an ASGI app; pass a FakeState to inspect or reprogram it in-process."""

    async def root(request: Request) -> Response:
        return PlainTextResponse("Ollama is running")

    async def version(request: Request) -> Response:
        return JSONResponse({"version": VERSION})

    async def requests(request: Request) -> Response:
        return JSONResponse(request.app.state.fake.requests)

    async def stats(request: Request) -> Response:
        return JSONResponse(request.app.state.fake.stats())

    app = Starlette(
        routes=[
            Route("/", root, methods=["GET", "HEAD"]),
            Route("/api/version", version, methods=["GET", "HEAD"]),
            Route("/api/tags", tags, methods=["GET", "HEAD"]),
            Route("/api/ps", ps, methods=["GET"]),
            Route("/api/show", show, methods=["POST"]),
            Route("/api/generate", generate, methods=["POST"]),
            Route("/api/chat", chat, methods=["POST"]),
            Route("/_fake/script", script, methods=["POST"]),
            Route("/_fake/reset", reset, methods=["POST"]),
            Route("/_fake/requests", requests, methods=["GET"]),
            Route("/_fake/stats", stats, methods=["GET"]),
        ]
    )
    app.state.fake = state if state is not None else FakeState()
    return app


def main(argv: list[str] | None = None) -> None:
    """CLI; every flag also reads a FAKE_OLLAMA_* variable so a compose file needs no command override."""
    import os

    import uvicorn  # only the CLI needs the server

    env = os.environ.get
    parser = argparse.ArgumentParser(description="Scripted Ollama for tests (never a measure of accuracy).")
    parser.add_argument("--host", default=env("FAKE_OLLAMA_HOST", "127.0.0.1"))
    parser.add_argument("--port", type=int, default=int(env("FAKE_OLLAMA_PORT", "11434")))
    parser.add_argument("--script", default=env("FAKE_OLLAMA_SCRIPT"), help="JSON, same shape as /_fake/script")
    parser.add_argument(
        "--models",
        default=env("FAKE_OLLAMA_MODELS", ",".join(DEFAULT_MODELS)),
        help="comma-separated model names (default: %(default)s)",
    )
    parser.add_argument("--log-level", default=env("FAKE_OLLAMA_LOG_LEVEL", "warning"))
    args = parser.parse_args(argv)
    baseline = Behaviour(models=[_full_name(m.strip()) for m in args.models.split(",") if m.strip()])
    if args.script:
        with open(args.script, encoding="utf-8") as handle:
            baseline = apply_script(baseline, json.load(handle))
    app = create_app(FakeState(baseline=baseline))
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level, lifespan="off", ws="none")


if __name__ == "__main__":
    main()
