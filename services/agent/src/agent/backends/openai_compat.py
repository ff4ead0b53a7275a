"""Any OpenAI-compatible model server (/v1/chat/completions: vLLM, llama-server, LM Studio, TGI, SGLang) as a
ModelBackend: translates the round into the OpenAI body, streams SSE back into the same round events.

Traps measured against llama.cpp's llama-server and handled here:
- a round cut off by max tokens (`finish_reason: length`) can end inside a tool call: its arguments are
  cut-off JSON. Such a call is passed on marked invalid (ToolCall.invalid) and the loop never executes it.
- tools sent to a server started without `--jinja` answer HTTP 500: the message says which flag is missing.
- a prompt over the server's context window is a 400 that names the fix (code context_length_exceeded).
- the prompt cache makes temperature-0 answers vary: `cache_prompt` is false unless MODEL_CACHE_PROMPT=true.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx

from agent.backends.base import (
    ModelStatus,
    RoundDone,
    RoundEvent,
    RoundRequest,
    ThinkingDelta,
    ToolCall,
    ToolCallsDelta,
)
from agent.backends.ollama import OllamaBackend
from agent.backends.openai_body import openai_body
from agent.backends.stream import RoundTimer, Trace, json_object, text_events, traced, transport_errors
from agent.backends.thinking import ThinkFilter
from agent.errors import AgentError, BadRequest, DependencyDown, ModelNotFound, UpstreamError

TOKEN_FIELDS = ("content", "reasoning_content", "tool_calls")  # a delta with one of these is a first token


def _message(text: str) -> tuple[str, str]:
    """(message, type) from an error body: OpenAI's {"error": {...}}, FastAPI's {"detail": ...} or plain text."""
    try:
        data = json.loads(text)
    except ValueError:
        return text.strip()[:500], ""
    err = data.get("error", data.get("detail", data)) if isinstance(data, dict) else data
    if isinstance(err, dict):
        return str(err.get("message", err)), str(err.get("type", ""))
    return str(err), ""


def error_for(status: int, text: str, request: RoundRequest, url: str) -> AgentError:
    message, kind = _message(text)
    if "context" in (message + kind).lower() and status in (400, 413):
        too_long = BadRequest(
            f"The conversation does not fit the model's context window at {url}: {message}. "
            "Shorten the conversation, or start the model server with a larger context.",
            param="messages",
            code="context_length_exceeded",
        )
        too_long.public = (  # the chat user's part: what to do, without the model server's address
            f"The conversation does not fit the model's context window ({message}). Start a new chat or shorten it."
        )
        return too_long
    if status == 404:
        return ModelNotFound(
            f"Model '{request.model}' is not served by the model server at {url}: {message}. "
            "To fix: set MODEL_NAME to the name the server serves (GET /v1/models), or start it with that model.",
            param="model",
        )
    if status == 500 and request.tools and "jinja" in message.lower():
        return UpstreamError(f"The model server at {url} cannot take tools: {message}. Start llama-server --jinja.")
    if status == 400:
        return BadRequest(f"The model server refused the request: {message}")
    if status in (401, 403):
        return UpstreamError(f"The model server at {url} refused the agent's key (HTTP {status}): set MODEL_API_KEY.")
    if status == 503:
        return DependencyDown(f"The model server at {url} is not ready: {message}", retry_after=5)
    return UpstreamError(f"The model server at {url} failed with HTTP {status}: {message}")


class ToolCallParts:
    """Tool calls arrive as fragments keyed by index: a name once, arguments as pieces of one JSON string."""

    def __init__(self) -> None:
        self.parts: dict[int, dict[str, str]] = {}

    def feed(self, deltas: list[dict[str, Any]]) -> None:
        for delta in deltas:
            part = self.parts.setdefault(int(delta.get("index", len(self.parts))), {"id": "", "name": "", "args": ""})
            fn = delta.get("function") or {}
            part["id"] = part["id"] or str(delta.get("id") or "")
            part["name"] += str(fn.get("name") or "")
            part["args"] += str(fn.get("arguments") or "")

    def calls(self, request_id: str, finish_reason: str) -> list[ToolCall]:
        out = []
        for index, part in sorted(self.parts.items()):
            invalid, args = None, {}
            try:
                parsed = json.loads(part["args"] or "{}")
                if isinstance(parsed, dict):
                    args = parsed
                else:
                    invalid = "the arguments are not a JSON object"
            except ValueError:
                cut = finish_reason == "length"
                invalid = "the arguments were cut off (the round hit its token limit)" if cut else "invalid JSON"
            call_id = part["id"] or f"call_{request_id or 'r'}_{index}"
            out.append(ToolCall(call_id, part["name"], args, invalid))
        return out


MODEL_SERVER_FIX = "Check that it is running and MODEL_URL is right."


async def _sse_chunks(resp: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    """The JSON payloads of `data:` lines until [DONE]; read to the end, so the connection is reused."""
    finished = False
    async for line in resp.aiter_lines():
        if finished or not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        if payload == "[DONE]":
            finished = True
            continue
        chunk = json_object(payload, "The model server")
        if "error" in chunk:
            message, _ = _message(payload)
            raise UpstreamError(f"The model server failed mid-answer: {message}")
        yield chunk


async def stream_completions(
    http: httpx.AsyncClient,
    url: str,
    request: RoundRequest,
    holdback: bool,
    cache_prompt: bool = False,
    trace: Trace | None = None,
) -> AsyncIterator[RoundEvent]:
    """One round as events; a connection closed before any answer (llama-server's keep-alive end) is tried again.
    `trace` follows each attempt's request on the wire (httpcore's trace events)."""
    first = True
    for attempt in (1, 2):
        try:
            async for event in _stream_once(http, url, request, holdback, cache_prompt, trace):
                first = False
                yield event
            return
        except DependencyDown as exc:  # nothing received yet: nothing is repeated
            if attempt == 2 or not (first and isinstance(exc.__cause__, httpx.RemoteProtocolError)):
                raise


async def _stream_once(
    http: httpx.AsyncClient, url: str, request: RoundRequest, holdback: bool, cache_prompt: bool, trace: Trace | None
) -> AsyncIterator[RoundEvent]:
    completion = CompletionRound(holdback)
    with transport_errors("The model server", url, MODEL_SERVER_FIX):
        body = openai_body(request, cache_prompt)
        async with http.stream("POST", f"{url}/v1/chat/completions", json=body, extensions=traced(trace)) as resp:
            if resp.status_code != 200:
                raise error_for(resp.status_code, (await resp.aread()).decode(errors="replace"), request, url)
            async for chunk in _sse_chunks(resp):
                for event in completion.events(chunk):
                    yield event
    for event in completion.finish(request.request_id):
        yield event


class CompletionRound:
    """Turns chat.completion.chunk payloads into round events; the usage comes with the last one."""

    def __init__(self, holdback: bool) -> None:
        self.think, self.calls, self.timer = ThinkFilter(holdback), ToolCallParts(), RoundTimer()
        self.finish_reason = "stop"
        self.usage: dict[str, Any] = {}

    def events(self, chunk: dict[str, Any]) -> list[RoundEvent]:
        self.usage = chunk.get("usage") or self.usage
        events: list[RoundEvent] = []
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            if any(delta.get(k) for k in TOKEN_FIELDS):
                self.timer.token()
            if delta.get("reasoning_content"):
                self.think.holdback = False  # the server separates reasoning itself: content is the answer
                events.append(ThinkingDelta(delta["reasoning_content"]))
            if delta.get("content"):
                events += text_events(*self.think.feed(delta["content"]))
            self.calls.feed(delta.get("tool_calls") or [])
            self.finish_reason = choice.get("finish_reason") or self.finish_reason
        return events

    def finish(self, request_id: str) -> list[RoundEvent]:
        """What the round still holds back, its tool calls (joined from fragments) and RoundDone."""
        events = text_events(*self.think.finish())
        if self.calls.parts:
            events.append(ToolCallsDelta(self.calls.calls(request_id, self.finish_reason)))
        done = RoundDone(
            done_reason="length" if self.finish_reason == "length" else "stop",
            prompt_tokens=int(self.usage.get("prompt_tokens") or 0),
            completion_tokens=int(self.usage.get("completion_tokens") or 0),
            time_to_first_token_s=self.timer.first_token,
        )
        return [*events, done]


async def openai_status(http: httpx.AsyncClient, url: str) -> ModelStatus:
    """Reachable and the served model ids (GET /v1/models); llama-server's /props tells whether tools work."""
    try:
        resp = await http.get(f"{url}/v1/models", timeout=3.0)
    except httpx.HTTPError as exc:
        return ModelStatus(False, detail=f"model server unreachable at {url}: {type(exc).__name__}")
    try:
        data = resp.json()
    except ValueError:
        data = None
    if resp.status_code != 200 or not isinstance(data, dict) or not isinstance(data.get("data"), list):
        body = " ".join(resp.text.split())[:200] or "an empty body"
        return ModelStatus(
            False,
            detail=f"GET {url}/v1/models answered HTTP {resp.status_code} with {body!r}, not a model list: "
            "is MODEL_URL the server's base URL?",
        )
    entries = [m for m in data["data"] if isinstance(m, dict)]
    models = [str(m.get("id", "")) for m in entries]
    owner = next((str(m["owned_by"]) for m in entries if m.get("owned_by")), "")  # llamacpp, vllm, ...
    scripted = owner == "fake"  # tests/fakes/fake_openai.py
    engine = "scripted OpenAI-protocol stand-in" if scripted else f"{owner or 'a server'} (OpenAI protocol)"
    detail = ""
    try:
        props = (await http.get(f"{url}/props", timeout=3.0)).json()
        template = str(props.get("chat_template", "")) if isinstance(props, dict) else ""
        if template and "tools" not in template:
            detail = "the model's chat template has no tool section: the server drops the tools silently"
    except (httpx.HTTPError, ValueError):
        pass  # not llama.cpp: nothing more to learn
    return ModelStatus(True, models, None, detail, engine=engine, scripted=scripted)


class OpenAICompatBackend(OllamaBackend):
    """Calls an OpenAI-compatible server from this process (direct mode, and the worker's rounds)."""

    def __init__(self, url: str, timeout: float, holdback: Any = None, api_key: str | None = None,
                 cache_prompt: bool = False) -> None:  # fmt: skip
        super().__init__(url, timeout, holdback, {"Authorization": f"Bearer {api_key}"} if api_key else None)
        self.cache_prompt = cache_prompt

    def _stream(self, request: RoundRequest, trace: Trace | None) -> AsyncIterator[RoundEvent]:
        holdback = self._holdback(request.model)
        return stream_completions(self.http, self.url, request, holdback, self.cache_prompt, trace)

    async def status(self) -> ModelStatus:
        return await openai_status(self.http, self.url)
