"""Which model server protocol this process speaks (MODEL_PROTOCOL): the one switch for direct mode and the worker."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx

from agent.backends.base import ModelBackend, ModelStatus, RoundEvent, RoundRequest
from agent.backends.ollama import OllamaBackend, ollama_status, stream_chat
from agent.backends.openai_compat import OpenAICompatBackend, openai_status, stream_completions
from agent.backends.stream import Trace
from agent.settings import Settings


def stream_engine(
    http: httpx.AsyncClient, settings: Settings, request: RoundRequest, trace: Trace | None = None
) -> AsyncIterator[RoundEvent]:
    """One round against the configured model server, as round events (the worker's side of a round); `trace` is
    its model request's own httpcore trace callback."""
    url, holdback = settings.model_endpoint(), settings.holds_back_think(request.model)
    if settings.model_protocol == "openai":
        return stream_completions(http, url, request, holdback, settings.model_cache_prompt, trace)
    return stream_chat(http, url, request, holdback, trace)


async def engine_status(http: httpx.AsyncClient, settings: Settings) -> ModelStatus:
    if settings.model_protocol == "openai":
        return await openai_status(http, settings.model_endpoint())
    return await ollama_status(http, settings.model_endpoint())


def direct_backend(settings: Settings) -> ModelBackend:
    """The backend for MODEL_BACKEND=direct: this process calls the model server itself."""
    if settings.model_protocol == "openai":
        key = settings.model_api_key.get_secret_value() if settings.model_api_key else None
        return OpenAICompatBackend(
            settings.model_endpoint(),
            settings.round_timeout_seconds,
            settings.holds_back_think,
            api_key=key,
            cache_prompt=settings.model_cache_prompt,
        )
    return OllamaBackend(settings.model_endpoint(), settings.round_timeout_seconds, settings.holds_back_think)
