"""The request bodies of both chat routes as permissive pydantic models, for /openapi.json only.

The routes read and check their bodies themselves (agent.api.bodies, agent.loop.messages), so a bad body
is a 400 in the route's own error shape rather than FastAPI's 422; these models only document the real
bodies, with unknown fields allowed as both protocols allow them. The schema is served behind
authentication; /docs and /redoc are not served at all (they load their scripts from a public CDN).
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from prometheus_client import CONTENT_TYPE_LATEST
from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import models_json_schema


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class ChatMessage(_Open):
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[dict[str, Any]] | None = Field(None, description="Text, or an array of text parts")
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    tool_name: str | None = None
    name: str | None = None


class StreamOptions(_Open):
    include_usage: bool | None = None


class ChatCompletionRequest(_Open):
    """OpenAI Chat Completions request; fields the agent does not use (temperature, tools…) are ignored."""

    model: str
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool | None = False
    stream_options: StreamOptions | None = None


class OllamaChatRequest(_Open):
    """Ollama /api/chat request; streaming is the default, as in Ollama."""

    model: str
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool | None = True


def body_of(model: type[BaseModel]) -> dict[str, Any]:
    """`openapi_extra` for a route whose JSON body is `model` (the route still reads the body itself)."""
    ref = {"$ref": f"#/components/schemas/{model.__name__}"}
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": ref}}}}


STATUS_TEXT = {
    400: "malformed body (not a JSON object, too deep, a NUL, a bad field)",
    401: "no identity: a missing or wrong API key, an SSO header from outside TRUSTED_PROXIES, a refused user name",
    403: "a browser page whose Origin is not in ALLOWED_ORIGINS (AGENT_AUTH=trusted_header)",
    404: "a model this agent does not serve, or the runtime has not pulled",
    413: "body larger than MAX_BODY_BYTES",
    415: "a POST body not declared JSON (Content-Type application/json or …+json)",
    429: "the user's rate limit per minute, or a full GPU queue: the message says which; Retry-After says when",
    502: "the model failed while answering",
    503: "a dependency is down (model runtime, tool server, queue, rate limiter); not ready (/readyz)",
    504: "the model took too long",
}
CHAT_STATUSES = (400, 401, 403, 404, 413, 415, 429, 502, 503, 504)
STATUSES: dict[tuple[str, str], tuple[int, ...]] = {
    ("post", "/v1/chat/completions"): CHAT_STATUSES,
    ("post", "/api/chat"): CHAT_STATUSES,
    ("post", "/api/show"): (400, 401, 403, 404, 413, 415),
    ("get", "/v1/models/{model_id}"): (401, 403, 404),
    ("get", "/readyz"): (503,),
}
OPEN = frozenset({"/healthz", "/readyz", "/metrics", "/api/version"})  # agent.api.access.OPEN_PATHS
ERRORS = {
    "OpenAIError": {
        "type": "object",
        "properties": {
            "error": {
                "type": "object",
                "properties": {k: {"type": ["string", "null"]} for k in ("message", "type", "param", "code")},
                "required": ["message", "type", "param", "code"],
            }
        },
    },
    "OllamaError": {"type": "object", "properties": {"error": {"type": "string"}}, "required": ["error"]},
}


def _document(schema: dict[str, Any]) -> None:
    """Bearer security on every route but the open ones, each route's error answers, /metrics' text type."""
    components = schema.setdefault("components", {})
    components["securitySchemes"] = {
        "bearer": {"type": "http", "scheme": "bearer", "description": "an API key from `agent-admin keys add`"}
    }
    components.setdefault("schemas", {}).update(ERRORS)
    for path, operations in schema.get("paths", {}).items():
        shape = "OllamaError" if path.startswith("/api/") else "OpenAIError"
        for method, operation in operations.items():
            responses = operation.setdefault("responses", {})
            responses.pop("422", None)  # the routes read their bodies themselves: a bad one is a 400
            if path in OPEN:
                operation["security"] = []
                statuses = STATUSES.get((method, path), ())
            else:
                operation["security"] = [{"bearer": []}]
                statuses = STATUSES.get((method, path), (401, 403))
            for status in statuses:
                ref = {"$ref": f"#/components/schemas/{shape}"}
                content = {"application/json": {"schema": ref}}
                responses[str(status)] = {"description": STATUS_TEXT[status], "content": content}
    metrics = schema.get("paths", {}).get("/metrics", {}).get("get")
    if metrics is not None:
        text = {CONTENT_TYPE_LATEST: {"schema": {"type": "string"}}}
        metrics["responses"]["200"] = {"description": "Prometheus text exposition format", "content": text}


def install_openapi(app: FastAPI) -> None:
    """app.openapi() with the chat bodies' models in components/schemas, security and every error answer."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(title=app.title, version=app.version, routes=app.routes)
            _, defs = models_json_schema(
                [(ChatCompletionRequest, "validation"), (OllamaChatRequest, "validation")],
                ref_template="#/components/schemas/{model}",
            )
            schema.setdefault("components", {}).setdefault("schemas", {}).update(defs.get("$defs", {}))
            _document(schema)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
