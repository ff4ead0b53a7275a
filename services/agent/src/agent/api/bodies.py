"""Reading and checking request bodies: size limit, JSON, model name (clear 4xx, never a 500)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from fastapi import Request

from agent import jsoncheck
from agent.backends.models import find_model
from agent.errors import BadRequest, ModelNotFound, PayloadTooLarge
from agent.settings import Settings


async def read_json(request: Request, limit: int) -> dict[str, Any]:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(f"request body is {declared} bytes; the limit is {limit} bytes")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise PayloadTooLarge(f"request body exceeds the limit of {limit} bytes")
    if not body:
        raise BadRequest("request body is empty; send a JSON object")
    data = jsoncheck.loads(bytes(body), "the request body")
    if not isinstance(data, dict):
        raise BadRequest("request body must be a JSON object")
    return data


def flag(data: dict[str, Any], name: str, default: bool) -> bool:
    """A boolean body field; anything but true/false/absent/null is a 400, not a guess."""
    value = data.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise BadRequest(f"`{name}` must be true or false", param=name)
    return value


def include_usage(data: dict[str, Any]) -> bool:
    options = data.get("stream_options")
    if options is None:
        return False
    if not isinstance(options, dict):
        raise BadRequest('`stream_options` must be an object such as {"include_usage": true}', param="stream_options")
    return bool(options.get("include_usage"))


def resolve_model(data: dict[str, Any], settings: Settings) -> str:
    """The served model a request names (agent.backends.models: `name` and `name:latest` are one model)."""
    name = data.get("model")
    if not isinstance(name, str) or not name.strip():
        raise BadRequest("`model` is required", param="model")
    served = settings.served_models()
    found = find_model(name, served)
    if found is not None:
        return found
    raise ModelNotFound(
        f"The model `{name}` does not exist or is not served by this agent. Served models: {', '.join(served)}.",
        param="model",
    )


def capture(path: Path | None, data: dict[str, Any]) -> None:
    """Opt-in debug capture of the last raw request (it holds personal data: owner-only permissions)."""
    if path is None:
        return
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, ensure_ascii=False, indent=2)
