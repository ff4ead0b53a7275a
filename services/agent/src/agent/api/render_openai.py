"""Renders tool-loop events in the OpenAI Chat Completions shape: one JSON object, or SSE chunks."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from agent.errors import AgentError, Language
from agent.loop.events import FinalEvent, LoopEvent, TextEvent, ThinkingEvent, ToolCallEvent, Usage


def trace_field(final: FinalEvent) -> dict[str, Any]:
    """The machine-readable trace beside the `Tools used:` footer (extension field `local_agent`)."""
    trace = {"tools_used": final.tools_used, "tool_calls": [t.to_dict() for t in final.trace], "rounds": final.rounds}
    trace |= {"grounding": final.grounding} if final.grounding is not None else {}
    return trace | ({"retrieval": final.retrieval} if final.retrieval is not None else {})


def usage_field(usage: Usage) -> dict[str, int]:
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
    }


async def collect(events: AsyncIterator[LoopEvent]) -> tuple[FinalEvent, str]:
    """Run the loop to its end (so the audit record is written with its real status): the final event and
    the thinking text, for the non-streaming renderers of both protocols."""
    thinking: list[str] = []
    final: FinalEvent | None = None
    async for event in events:
        if isinstance(event, ThinkingEvent):
            thinking.append(event.text)
        elif isinstance(event, FinalEvent):
            final = event
    if final is None:  # pragma: no cover - the loop always ends with a FinalEvent or raises
        raise AgentError("the tool loop ended without an answer")
    return final, "".join(thinking)


# A chat screen's mark on an answer that did not end (stopped, or cut by a failure): shown above the answer from
# before its first word, hidden by the answer's normal end. Open WebUI shows a chunk's `event` as its own.
UNFINISHED = {"en": "Answer not finished", "tr": "Yanıt tamamlanmadı"}


class OpenAIRenderer:
    """`screen`: the question's language when the caller is a chat screen (a front-end key naming its user):
    its stream then carries the unfinished mark and shows a failure as answer text; None for every other client."""

    def __init__(self, model: str, screen: Language | None = None) -> None:
        self.model = model
        self.screen = screen
        self.id = f"chatcmpl-{uuid.uuid4().hex[:24]}"
        self.created = int(time.time())

    async def complete(self, events: AsyncIterator[LoopEvent]) -> dict[str, Any]:
        final, thinking = await collect(events)
        message: dict[str, Any] = {"role": "assistant", "content": final.answer}
        if thinking:
            message["reasoning_content"] = thinking
        return {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": "local-agent",
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": final.finish_reason}],
            "usage": usage_field(final.usage),
            "local_agent": trace_field(final),
        }

    def _data(self, choices: list[dict[str, Any]], **extra: Any) -> str:
        body = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": "local-agent",
            "choices": choices,
            **extra,
        }
        return f"data: {json.dumps(body, ensure_ascii=False)}\n\n"

    def _chunk(self, delta: dict[str, Any], finish_reason: str | None = None, **extra: Any) -> str:
        return self._data([{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}], **extra)

    def _status(self, status: dict[str, Any]) -> str:
        """A status event for Open WebUI (which shows a chunk's `event` as its own), with no choices."""
        return self._data([], event={"type": "status", "data": status})

    async def stream(self, events: AsyncIterator[LoopEvent], include_usage: bool) -> AsyncIterator[str]:
        if self.screen is not None:  # before anything else: a stop before the first word is marked too
            yield self._status({"description": UNFINISHED[self.screen], "done": True})
        yield self._chunk({"role": "assistant", "content": ""})
        answered = False
        try:
            async for event in events:
                if isinstance(event, TextEvent):
                    answered = True
                    yield self._chunk({"content": event.text})
                elif isinstance(event, ThinkingEvent):
                    yield self._chunk({"reasoning_content": event.text})
                elif isinstance(event, ToolCallEvent):
                    # An SSE comment: keeps proxies from timing out while the tool runs; clients ignore it.
                    yield f": calling tool {event.call.name}\n\n"
                elif isinstance(event, FinalEvent):
                    if self.screen is not None:  # the answer ended: the mark goes
                        yield self._status({"description": "", "done": True, "hidden": True})
                    yield self._chunk({}, event.finish_reason, local_agent=trace_field(event))
                    if include_usage:
                        usage = {
                            "id": self.id,
                            "object": "chat.completion.chunk",
                            "created": self.created,
                            "model": self.model,
                            "choices": [],
                            "usage": usage_field(event.usage),
                        }
                        yield f"data: {json.dumps(usage)}\n\n"
        except AgentError as exc:
            if self.screen is None:
                yield f"data: {json.dumps(exc.body(), ensure_ascii=False)}\n\n"
                return
            # Where the answer goes, so it reads the same before the first word and mid-answer (Open WebUI would
            # put an error chunk in a box of its own), in the question's language; the mark stays.
            lead = "\n\n" if answered else ""
            yield self._chunk({"content": f"{lead}⚠️ {exc.client_message_in(self.screen)}"})
        yield "data: [DONE]\n\n"
