"""The agent's HTTP API: OpenAI- and Ollama-compatible chat, model lists, health, readiness and metrics."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from typing import Any

import structlog
from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from agent import __version__
from agent.api import access
from agent.api.bodies import capture, flag, include_usage, read_json, resolve_model
from agent.api.info import add_info_routes
from agent.api.middleware import ObserveMiddleware
from agent.api.render_ollama import OllamaRenderer
from agent.api.render_openai import OpenAIRenderer
from agent.api.schema import ChatCompletionRequest, OllamaChatRequest, body_of, install_openapi
from agent.backends.base import ModelBackend
from agent.errors import AgentError, BadRequest
from agent.loop.engine import LoopEvent, ToolLoop
from agent.loop.messages import normalize
from agent.loop.tasks import TaskRunner, detect
from agent.mcp_client import ToolBox, request_id_var
from agent.settings import Settings

log = structlog.get_logger("agent.api")


def make_backend(settings: Settings) -> ModelBackend:
    if settings.model_backend == "queue":
        from agent.queue.client import QueueBackend  # the GPU queue needs Redis; the direct backend does not

        return QueueBackend(settings)
    from agent.backends.engine import direct_backend

    return direct_backend(settings)


def error_response(exc: AgentError, ollama_shape: bool = False) -> JSONResponse:
    headers = {}
    if exc.retry_after is not None:
        headers["Retry-After"] = str(max(1, round(exc.retry_after)))
        headers["x-should-retry"] = "false"  # the openai SDK would otherwise retry a full queue twice
    body: dict[str, Any] = {"error": exc.client_message} if ollama_shape else exc.body()
    return JSONResponse(body, status_code=exc.status, headers=headers)


async def _first(events: AsyncIterator[LoopEvent]) -> AsyncIterator[LoopEvent]:
    """Pull the first event before answering, so failures before any token get their real HTTP status."""
    first = await anext(events)

    async def chained() -> AsyncIterator[LoopEvent]:
        yield first
        async for event in events:
            yield event

    return chained()


async def _until_disconnect(request: Request, work: Awaitable[Any]) -> Any:
    """Run a non-streaming answer, cancelling it (and its queued round) if the client goes away."""
    task = asyncio.ensure_future(work)
    while not task.done():
        done, _ = await asyncio.wait([task], timeout=0.5)
        if not done and await request.is_disconnected():
            task.cancel()
    return task.result()


def create_app(settings: Settings, backend: ModelBackend | None = None, toolbox: ToolBox | None = None) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.backend = backend or make_backend(settings)
        app.state.toolbox = toolbox or ToolBox(
            settings.mcp_url,
            settings.mcp_token_source().get,
            settings.tool_timeout_seconds,
            settings.tools_cache_seconds,
            policy=app.state.security.policy,
        )
        app.state.loop = ToolLoop(settings, app.state.backend, app.state.toolbox)
        app.state.tasks = TaskRunner(settings, app.state.backend)
        log.info("api_started", model=settings.ollama_model, backend=settings.model_backend)
        yield
        access.flush(app.state.security)
        await app.state.toolbox.aclose()
        await app.state.backend.aclose()

    # No /docs or /redoc (their pages load scripts from a public CDN); the schema is a route behind auth below.
    app = FastAPI(
        title="local-agent", version=__version__, lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None
    )
    install_openapi(app)
    app.state.settings = settings
    access.install(app, settings)  # before any route: authentication applies to every route declared below

    app.add_middleware(ObserveMiddleware)

    @app.exception_handler(AgentError)
    async def agent_error(request: Request, exc: AgentError) -> JSONResponse:
        log.warning("request_failed", status=exc.status, error=type(exc).__name__, message=exc.message)
        access.audit_failure(request, exc)
        return error_response(exc, ollama_shape=request.url.path.startswith("/api/"))

    def start_loop(request: Request, data: dict[str, Any]) -> tuple[str, AsyncIterator[LoopEvent]]:
        capture(settings.debug_capture_file, data)
        model = resolve_model(data, settings)
        conversation = normalize(data.get("messages"), settings.keep_client_system)
        if len(conversation) > settings.max_messages:
            raise BadRequest(
                f"too many messages ({len(conversation)} > MAX_MESSAGES={settings.max_messages})", param="messages"
            )
        task = detect(conversation, settings.client_task_pattern)
        if task is not None:  # a title/tags/follow-up request of the front-end, not the user's question
            runner: TaskRunner = request.app.state.tasks
            events = runner.run(task, conversation, model, request_id_var.get())
        else:
            loop: ToolLoop = request.app.state.loop
            events = loop.run(conversation, model, access.caller(request), request_id_var.get())
        return model, access.audited(request, model, conversation, events, task)

    @app.get("/openapi.json", include_in_schema=False)
    async def openapi_schema() -> JSONResponse:
        return JSONResponse(app.openapi())

    @app.post("/v1/chat/completions", openapi_extra=body_of(ChatCompletionRequest))
    async def chat_completions(request: Request) -> Response:
        data = await read_json(request, settings.max_body_bytes)
        stream, usage = flag(data, "stream", False), include_usage(data)  # checked before anything is queued
        model, events = start_loop(request, data)
        renderer = OpenAIRenderer(model)
        if not stream:
            return JSONResponse(await _until_disconnect(request, renderer.complete(events)))
        chunks = renderer.stream(await _until_disconnect(request, _first(events)), usage)
        return StreamingResponse(chunks, media_type="text/event-stream", headers={"Cache-Control": "no-cache"})

    @app.post("/api/chat", openapi_extra=body_of(OllamaChatRequest))
    async def ollama_chat(request: Request) -> Response:
        data = await read_json(request, settings.max_body_bytes)
        stream = flag(data, "stream", True)
        model, events = start_loop(request, data)
        renderer = OllamaRenderer(model)
        if not stream:
            return JSONResponse(await _until_disconnect(request, renderer.complete(events)))
        first = await _until_disconnect(request, _first(events))  # a client gone before its first token stops it
        return StreamingResponse(renderer.stream(first), media_type="application/x-ndjson")

    add_info_routes(app, settings)

    @app.get("/metrics")
    async def prometheus_metrics() -> Response:
        return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)

    return app
