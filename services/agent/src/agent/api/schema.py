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


def install_openapi(app: FastAPI) -> None:
    """app.openapi() with the chat bodies' models in components/schemas."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(title=app.title, version=app.version, routes=app.routes)
            _, defs = models_json_schema(
                [(ChatCompletionRequest, "validation"), (OllamaChatRequest, "validation")],
                ref_template="#/components/schemas/{model}",
            )
            schema.setdefault("components", {}).setdefault("schemas", {}).update(defs.get("$defs", {}))
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
