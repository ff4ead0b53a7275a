"""Which model server protocol this process speaks (MODEL_PROTOCOL): the one switch for direct mode and the worker."""

from __future__ import annotations

import httpx

from agent.backends.base import ModelStatus
from agent.backends.ollama import OllamaBackend, ollama_status
from agent.backends.openai_compat import OpenAICompatBackend, openai_status
from agent.settings import Settings


async def engine_status(http: httpx.AsyncClient, settings: Settings) -> ModelStatus:
    if settings.model_protocol == "openai":
        return await openai_status(http, settings.model_endpoint())
    return await ollama_status(http, settings.model_endpoint())


def direct_backend(settings: Settings) -> OllamaBackend:
    """The backend that calls the model server from this process: the API's with MODEL_BACKEND=direct, and the one
    the worker streams its rounds through (agent.queue.jobs), so both share one deadline and one metrics path."""
    if settings.model_protocol == "openai":
        key = settings.model_api_key.get_secret_value() if settings.model_api_key else None
        return OpenAICompatBackend(
            settings.model_endpoint(),
            settings.round_timeout_seconds,
            settings.holds_back_think,
            api_key=key,
            cache_prompt=settings.model_cache_prompt,
        )
    # MODEL_API_KEY's header too, as the worker has always sent it to either protocol (an authenticating proxy)
    return OllamaBackend(
        settings.model_endpoint(), settings.round_timeout_seconds, settings.holds_back_think, settings.model_headers()
    )
