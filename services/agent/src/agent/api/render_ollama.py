"""Renders tool-loop events in Ollama's /api/chat shape: one JSON object, or NDJSON lines (the default)."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

from agent.api.render_openai import collect, trace_field
from agent.errors import AgentError, Language
from agent.loop.events import FinalEvent, LoopEvent, TextEvent, ThinkingEvent


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


class OllamaRenderer:
    def __init__(self, model: str, language: Language = "en") -> None:
        self.model = model
        self.language = language  # of the question: the chat user's error text is written in it
        self.started = time.monotonic()

    def _done(self, final: FinalEvent, content: str, thinking: str) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if thinking:
            message["thinking"] = thinking
        return {
            "model": self.model,
            "created_at": _now(),
            "message": message,
            "done": True,
            "done_reason": final.finish_reason,
            "total_duration": int((time.monotonic() - self.started) * 1e9),
            "prompt_eval_count": final.usage.prompt_tokens,
            "eval_count": final.usage.completion_tokens,
            "local_agent": trace_field(final),
        }

    async def complete(self, events: AsyncIterator[LoopEvent]) -> dict[str, Any]:
        final, thinking = await collect(events)
        return self._done(final, final.answer, thinking)

    def _line(self, body: dict[str, Any]) -> str:
        return json.dumps(body, ensure_ascii=False) + "\n"

    async def stream(self, events: AsyncIterator[LoopEvent]) -> AsyncIterator[str]:
        try:
            async for event in events:
                if isinstance(event, TextEvent | ThinkingEvent):
                    key = "content" if isinstance(event, TextEvent) else "thinking"
                    message = {"role": "assistant", "content": "", key: event.text}
                    yield self._line({"model": self.model, "created_at": _now(), "message": message, "done": False})
                elif isinstance(event, FinalEvent):
                    yield self._line(self._done(event, "", ""))
        except AgentError as exc:
            for line in self.failed(exc, "\n\n"):
                yield line

    def failed(self, exc: AgentError, lead: str = "") -> list[str]:
        """A failure as the chat shows it: Open WebUI ignores an `error` line and would show a cut-off answer as
        complete, so the error text goes out as a last content chunk first, then the error line for clients
        that read it. `lead` separates it from words already sent."""
        text = exc.client_message_in(self.language)
        note = {"role": "assistant", "content": f"{lead}⚠️ {text}"}
        return [
            self._line({"model": self.model, "created_at": _now(), "message": note, "done": False}),
            self._line({"error": text}),
        ]
