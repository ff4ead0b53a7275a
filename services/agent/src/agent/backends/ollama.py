"""Ollama's native /api/chat as a ModelBackend: streams NDJSON into round events, maps errors.

Used directly by the API (MODEL_BACKEND=direct) and by the GPU worker, which relays the same events
through Redis (agent.queue.client).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx

from agent import metrics
from agent.backends.base import (
    ModelStatus,
    RoundDone,
    RoundEvent,
    RoundRequest,
    ThinkingDelta,
    ToolCall,
    ToolCallsDelta,
)
from agent.backends.stream import RoundTimer, Trace, json_object, text_events, traced, transport_errors
from agent.backends.thinking import ThinkFilter
from agent.context import RequestContext
from agent.errors import AgentError, BadRequest, DependencyDown, ModelNotFound, UpstreamError, UpstreamTimeout


def pull_hint(model: str) -> str:
    # The serving `ollama` container has no way out (internal network): only the ollama-pull service may download.
    return (
        f"run `OLLAMA_PULL_MODELS={model} docker compose run --rm ollama-pull` in the compose stack "
        f"(or `ollama pull {model}` where Ollama runs)"
    )


def _error_for(status: int, text: str, request: RoundRequest, url: str) -> AgentError:
    try:
        message = str(json.loads(text).get("error", text))
    except (ValueError, AttributeError):
        message = text
    if status == 404:
        missing = ModelNotFound(
            f"Model '{request.model}' is not available in Ollama at {url}: {message}. "
            f"To fix: {pull_hint(request.model)}.",
            param="model",
        )
        missing.public = f"The model '{request.model}' is not installed on the server yet; tell the operator."
        return missing
    if status == 400:
        return BadRequest(f"Ollama refused the request: {message}")
    if status == 503:
        return DependencyDown(f"Ollama at {url} is overloaded: {message}", retry_after=5)
    return UpstreamError(f"Ollama at {url} failed with HTTP {status}: {message}")


def _tool_calls(raw: list[dict[str, Any]]) -> list[ToolCall]:
    calls = []
    for item in raw:
        fn = item.get("function") or {}
        args = fn.get("arguments") or {}
        if isinstance(args, str):  # some versions/models send a JSON string
            try:
                args = json.loads(args)
            except ValueError:
                args = {"_raw": args}
        calls.append(
            ToolCall(
                id=item.get("id") or f"call_{uuid.uuid4().hex[:8]}",
                name=str(fn.get("name", "")),
                arguments=args if isinstance(args, dict) else {},
            )
        )
    return calls


OLLAMA_FIX = "Check that the `ollama` service is running and OLLAMA_URL is right."
TOKEN_FIELDS = ("content", "thinking", "tool_calls")  # a message with one of these is a first token


async def stream_chat(
    http: httpx.AsyncClient, url: str, request: RoundRequest, holdback: bool, trace: Trace | None = None
) -> AsyncIterator[RoundEvent]:
    """Stream one /api/chat round as events; thinking is split off content on the way. `trace` follows the
    request's progress on the wire (httpcore's trace events)."""
    chat = ChatRound(holdback)
    with transport_errors("Ollama", url, OLLAMA_FIX):
        async with http.stream("POST", f"{url}/api/chat", json=request.ollama_body(), extensions=traced(trace)) as resp:
            if resp.status_code != 200:
                raise _error_for(resp.status_code, (await resp.aread()).decode(errors="replace"), request, url)
            async for chunk in _ndjson(resp):
                for event in chat.events(chunk):
                    yield event
    if chat.done is None:
        raise UpstreamError("Ollama closed the stream before the answer was complete")
    yield chat.done


async def _ndjson(resp: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    """The chunks up to the done one; read to the end, so the connection is reused. An error line raises."""
    done = False
    async for line in resp.aiter_lines():
        if done or not line.strip():
            continue
        chunk = json_object(line, "Ollama")
        if "error" in chunk:
            raise UpstreamError(f"Ollama failed mid-answer: {chunk['error']}")
        done = bool(chunk.get("done"))
        yield chunk


class ChatRound:
    """Turns /api/chat chunks into round events: thinking split off the answer, the first token timed."""

    def __init__(self, holdback: bool) -> None:
        self.think, self.timer = ThinkFilter(holdback), RoundTimer()
        self.done: RoundDone | None = None

    def events(self, chunk: dict[str, Any]) -> list[RoundEvent]:
        msg = chunk.get("message") or {}
        if not isinstance(msg, dict):
            raise UpstreamError(f"Ollama sent a malformed stream line (message is not an object): {msg!r:.120}")
        if any(msg.get(k) for k in TOKEN_FIELDS):
            self.timer.token()
        events: list[RoundEvent] = []
        if msg.get("thinking"):
            self.think.holdback = False  # Ollama separates thinking itself: content is the answer
            events.append(ThinkingDelta(msg["thinking"]))
        if msg.get("content"):
            events += text_events(*self.think.feed(msg["content"]))
        if msg.get("tool_calls"):
            events.append(ToolCallsDelta(_tool_calls(msg["tool_calls"])))
        if chunk.get("done"):
            events += text_events(*self.think.finish())
            self.done = self._round_done(chunk)
        return events

    def _round_done(self, chunk: dict[str, Any]) -> RoundDone:
        return RoundDone(
            done_reason=chunk.get("done_reason") or "stop",
            prompt_tokens=int(chunk.get("prompt_eval_count") or 0),
            completion_tokens=int(chunk.get("eval_count") or 0),
            time_to_first_token_s=self.timer.first_token,
        )


def record_round(request: RoundRequest, done: RoundDone | None, elapsed: float) -> None:
    """Per-round model metrics, the one place they are observed (OllamaBackend.stream_round, in whichever process
    streams from the model server). `done` is None when the stream ended without its summary (then only the
    duration is known)."""
    metrics.ROUND_DURATION.labels(request.model, str(request.round)).observe(max(0.0, elapsed))
    if done is None:
        return
    if done.time_to_first_token_s is not None:
        metrics.TIME_TO_FIRST_TOKEN.observe(done.time_to_first_token_s)
    metrics.LLM_TOKENS.labels(request.model, "prompt").inc(done.prompt_tokens)
    metrics.LLM_TOKENS.labels(request.model, "completion").inc(done.completion_tokens)


async def ollama_status(http: httpx.AsyncClient, url: str) -> ModelStatus:
    try:
        tags = (await http.get(f"{url}/api/tags", timeout=3.0)).json()
        version = (await http.get(f"{url}/api/version", timeout=3.0)).json().get("version")
    except (httpx.HTTPError, ValueError) as exc:
        return ModelStatus(False, detail=f"Ollama unreachable at {url}: {type(exc).__name__}")
    models = [m.get("name", "") for m in tags.get("models", [])]
    scripted = str(version or "").endswith("-fake")  # tests/fakes/fake_ollama.py (and scripts/try's stand-in)
    engine = f"scripted Ollama stand-in {version}" if scripted else f"Ollama {version or '?'}"
    return ModelStatus(True, models, version, engine=engine, scripted=scripted)


async def warm_up(http: httpx.AsyncClient, url: str, model: str, options: dict[str, Any]) -> tuple[bool, str]:
    """Load the model with exactly the options real rounds send (another num_ctx would reload it)."""
    body = {"model": model, "messages": [], "stream": False, "options": options}
    try:
        resp = await http.post(f"{url}/api/chat", json=body)
    except httpx.HTTPError as exc:
        return False, f"warm-up failed: {type(exc).__name__}"
    if resp.status_code != 200:
        return False, f"warm-up failed: HTTP {resp.status_code} {resp.text[:200]}"
    return True, "ready"


class OllamaBackend:
    """Calls Ollama from this process (no queue): the agent core's first backend and the worker's engine."""

    def __init__(self, url: str, timeout: float, holdback: Any = None, headers: dict[str, str] | None = None) -> None:
        self.url, self.timeout = url.rstrip("/"), timeout
        self.http = httpx.AsyncClient(timeout=httpx.Timeout(timeout, connect=5.0), headers=headers)
        self._holdback = holdback or (lambda model: False)

    def _stream(self, request: RoundRequest, trace: Trace | None) -> AsyncIterator[RoundEvent]:
        return stream_chat(self.http, self.url, request, self._holdback(request.model), trace)

    async def stream_round(
        self,
        request: RoundRequest,
        context: RequestContext | None = None,
        *,
        trace: Trace | None = None,
        waited: float = 0.0,
    ) -> AsyncIterator[RoundEvent]:
        """One round from this process; it is the one talking to the model, so it records the model metrics (in
        direct mode the API, through the queue the worker: agent.queue.jobs).

        ROUND_TIMEOUT_SECONDS bounds the whole round: httpx's timeout is per read, so a server that trickles tokens
        (or sends some, then nothing) would otherwise hold the request for ever. The deadline covers only the wait
        for the model's next event, never the caller's work between events. `trace` follows the model request on the
        wire (httpcore's trace events); `waited` is the round's time in the queue before this call, counted in its
        duration (enqueue to last token).
        """
        started = time.monotonic() - waited
        deadline = asyncio.get_running_loop().time() + self.timeout
        stream = self._stream(request, trace)
        async with contextlib.aclosing(stream):  # type: ignore[type-var]
            while True:
                try:
                    async with asyncio.timeout_at(deadline):
                        event = await anext(stream)
                except StopAsyncIteration:
                    return
                except TimeoutError as exc:
                    record_round(request, None, time.monotonic() - started)
                    raise UpstreamTimeout(
                        f"The model did not finish the round within ROUND_TIMEOUT_SECONDS={self.timeout:g}"
                    ) from exc
                if isinstance(event, RoundDone):
                    record_round(request, event, time.monotonic() - started)
                yield event

    async def status(self) -> ModelStatus:
        return await ollama_status(self.http, self.url)

    async def aclose(self) -> None:
        await self.http.aclose()
