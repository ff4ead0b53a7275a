"""The agent's HTTP API: OpenAI- and Ollama-compatible chat, model lists, health, readiness and metrics."""

from __future__ import annotations

import math
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import structlog
from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from agent import __version__
from agent.api import access, chat, info
from agent.api.middleware import ObserveMiddleware
from agent.api.readiness import Readiness
from agent.api.schema import install_openapi
from agent.backends.base import ModelBackend
from agent.errors import AgentError
from agent.loop.engine import ToolLoop
from agent.loop.tasks import TaskRunner
from agent.mcp_client import ToolBox
from agent.settings import Settings

log = structlog.get_logger("agent.api")
CLIENT_LEFT = 499


def make_backend(settings: Settings) -> ModelBackend:
    if settings.model_backend == "queue":
        from agent.queue.client import QueueBackend  # the GPU queue needs Redis; the direct backend does not

        return QueueBackend(settings)
    from agent.backends.engine import direct_backend

    return direct_backend(settings)


def error_response(exc: AgentError, ollama_shape: bool = False) -> JSONResponse:
    headers = {}
    if exc.retry_after is not None:
        headers["Retry-After"] = str(max(1, math.ceil(exc.retry_after)))  # as the messages round it
        headers["x-should-retry"] = "false"  # the openai SDK would otherwise retry a full queue twice
    body: dict[str, Any] = {"error": exc.client_message} if ollama_shape else exc.body()
    return JSONResponse(body, status_code=exc.status, headers=headers)


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
            reconnect_seconds=settings.tool_reconnect_seconds,
        )
        app.state.loop = ToolLoop(settings, app.state.backend, app.state.toolbox)
        app.state.tasks = TaskRunner(settings, app.state.backend)
        log.info("api_started", model=settings.model_name, backend=settings.model_backend)
        yield
        access.flush(app.state.security)
        await app.state.toolbox.aclose()
        await app.state.backend.aclose()

    # No /docs or /redoc (their pages load scripts from a public CDN); the schema is a route behind auth below.
    app = FastAPI(
        title="local-agent", version=__version__, lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None
    )
    install_openapi(app)
    app.state.settings, app.state.started = settings, int(time.time())  # read by the routes (agent.api.deps)
    app.state.readiness = Readiness()  # logs what /readyz no longer shows, when it changes
    access.install(app, settings)  # before any route: authentication applies to every route declared below

    app.add_middleware(ObserveMiddleware)

    @app.exception_handler(AgentError)
    async def agent_error(request: Request, exc: AgentError) -> JSONResponse:
        if not getattr(request.state, "failure_logged", False):  # a chat's failure: logged by access.Audited
            log.warning("request_failed", status=exc.status, error=type(exc).__name__, message=exc.message)
        await access.audit_failure(request, exc)
        return error_response(exc, ollama_shape=request.url.path.startswith("/api/"))

    @app.exception_handler(chat.ClientLeft)
    async def client_left(request: Request, exc: chat.ClientLeft) -> Response:
        # Nobody reads this answer: 499 (nginx's "client closed request") is for the metric and the log.
        log.info("client_left", endpoint=request.url.path)
        return Response(status_code=CLIENT_LEFT)

    @app.get("/openapi.json", include_in_schema=False)
    async def openapi_schema() -> JSONResponse:
        return JSONResponse(app.openapi())

    app.include_router(chat.router)  # after access.install: its guard applies to every included route
    app.include_router(info.router)

    @app.get("/metrics")
    async def prometheus_metrics() -> Response:
        return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)

    return app
