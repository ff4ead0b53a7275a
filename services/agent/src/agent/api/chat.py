"""The chat routes: OpenAI's /v1/chat/completions and Ollama's /api/chat, thin renderers of one tool loop."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.types import Receive, Scope, Send

from agent.api import access
from agent.api.bodies import capture, flag, include_usage, read_json, resolve_model
from agent.api.deps import LoopDep, SettingsDep, TasksDep
from agent.api.render_ollama import OllamaRenderer
from agent.api.render_openai import OpenAIRenderer
from agent.api.schema import ChatCompletionRequest, OllamaChatRequest, body_of
from agent.backends.base import last_user_text
from agent.errors import AgentError, BadRequest, guess_language
from agent.loop.engine import ToolLoop
from agent.loop.events import LoopEvent
from agent.loop.messages import normalize
from agent.loop.tasks import TaskRunner, detect
from agent.settings import Settings

router = APIRouter()


@router.post("/v1/chat/completions", openapi_extra=body_of(ChatCompletionRequest))
async def chat_completions(request: Request, settings: SettingsDep, loop: LoopDep, tasks: TasksDep) -> Response:
    data = await read_json(request, settings.max_body_bytes)
    stream, usage = flag(data, "stream", False), include_usage(data)  # checked before anything is queued
    model, events = start_loop(request, data, settings, loop, tasks)
    if not stream:
        return JSONResponse(await _until_disconnect(request, OpenAIRenderer(model).complete(events)))
    headers = {"Cache-Control": "no-cache"}
    if request.state.identity.method == "frontend":
        # A chat screen's stream starts at once with its unfinished mark (a stop before the first word leaves it),
        # a failure included: Starlette cancels the loop if the screen goes (499 in the audit log, as mid-answer;
        # before the loop's first event too, as the answer closes its events).
        screen = OpenAIRenderer(model, guess_language(last_user_text(data.get("messages"))))
        return Answer(screen.stream(events, usage), events, media_type="text/event-stream", headers=headers)
    chunks = OpenAIRenderer(model).stream(await _until_disconnect(request, _first(events)), usage)
    return Answer(chunks, events, media_type="text/event-stream", headers=headers)


@router.post("/api/chat", openapi_extra=body_of(OllamaChatRequest))
async def ollama_chat(request: Request, settings: SettingsDep, loop: LoopDep, tasks: TasksDep) -> Response:
    data = await read_json(request, settings.max_body_bytes)
    stream = flag(data, "stream", True)
    model, events = start_loop(request, data, settings, loop, tasks)
    renderer = OllamaRenderer(model, guess_language(last_user_text(data.get("messages"))))
    if not stream:
        return JSONResponse(await _until_disconnect(request, renderer.complete(events)))
    try:
        first = await _until_disconnect(request, _first(events))  # a client gone before its first token stops it
    except AgentError as exc:
        if request.state.identity.method != "frontend":
            raise  # other clients get the HTTP status and error body of docs/api.md
        # A chat screen shows the failure where the answer goes, as it does a failure mid-answer.
        return StreamingResponse(iter(renderer.failed(exc)), media_type="application/x-ndjson")
    return Answer(renderer.stream(first), events, media_type="application/x-ndjson")


def start_loop(
    request: Request, data: dict[str, Any], settings: Settings, loop: ToolLoop, tasks: TaskRunner
) -> tuple[str, access.Audited]:
    """Check the body, then run the tool loop (or the front-end's background task) under the audit trail."""
    capture(settings.debug_capture_file, data)
    model = resolve_model(data, settings)
    conversation = normalize(data.get("messages"), settings.keep_client_system)
    if len(conversation) > settings.max_messages:
        raise BadRequest(
            f"too many messages ({len(conversation)} > MAX_MESSAGES={settings.max_messages})", param="messages"
        )
    task = detect(conversation, settings.client_task_pattern)
    context = access.request_context(request)  # the request's one context, handed down to every layer below
    if task is not None:  # a title/tags/follow-up request of the front-end, not the user's question
        events = tasks.run(task, conversation, model, context)
    else:
        events = loop.run(conversation, model, access.caller(request), context)
    return model, access.Audited(request, model, conversation, events, context, task)


async def _first(events: AsyncIterator[LoopEvent]) -> AsyncIterator[LoopEvent]:
    """Pull the first event before answering, so failures before any token get their real HTTP status."""
    first = await anext(events)

    async def chained() -> AsyncIterator[LoopEvent]:
        yield first
        async for event in events:
            yield event

    return chained()


class Answer(StreamingResponse):
    """A streamed answer that closes the loop's audited events as it ends, however it ends: Starlette leaves a
    stream it stopped reading (its client gone) open, so their record would wait for the garbage collector, or
    never be written when the stream had pulled no event yet (agent.api.access.Audited)."""

    def __init__(
        self,
        content: AsyncIterator[str],
        events: access.Audited,
        media_type: str,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(content, media_type=media_type, headers=headers)
        self.events = events

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            await self.events.aclose()


class ClientLeft(Exception):
    """The client went away before its answer (or first token) was ready; its work has been cancelled."""


async def _until_disconnect(request: Request, work: Awaitable[Any]) -> Any:
    """Run an answer (or wait for the first event of a stream), cancelling it and its queued round if the
    client goes away: then ClientLeft, an info line and status 499 (agent.api.app), never a traceback."""
    task = asyncio.ensure_future(work)
    while not task.done():
        done, _ = await asyncio.wait([task], timeout=0.5)
        if not done and await request.is_disconnected():
            task.cancel()
            await asyncio.wait([task])  # its cleanup (the queued round taken back) runs before the 499
            raise ClientLeft
    return task.result()
