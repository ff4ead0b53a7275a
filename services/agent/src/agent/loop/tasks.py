"""Client background tasks: recognise them (Open WebUI's `### Task:` prompts) and serve them cheaply.

A chat front-end asks for a title, tags or follow-up suggestions after each answer. These are not the user's
questions: they get no tools, no tool loop and no system prompt of ours, one round at most, queued below
every user round (and preempted by one), and a deterministic local answer when the GPU is busy
(CLIENT_TASKS=model), always (local), or an empty one at once (off).
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass

import structlog

from agent import metrics
from agent.backends.base import Message, ModelBackend, RoundDone, RoundRequest, TextDelta
from agent.context import RequestContext
from agent.errors import AgentError
from agent.loop.events import FinalEvent, LoopEvent, TextEvent, Usage
from agent.settings import Settings

log = structlog.get_logger("agent.loop.tasks")
# The JSON key the task asks for names its kind: { "title": … }, { "tags": [...] }, { "follow_ups": [...] }.
OUTPUT_KEY = re.compile(r'\{\s*"(title|tags|follow_ups|queries|text)"\s*:')
HISTORY = re.compile(r"<chat_history>(.*?)</chat_history>", re.DOTALL)
EMPTY: dict[str, object] = {"tags": [], "follow_ups": [], "queries": [], "text": ""}
TITLE_WORDS = 6


@dataclass(frozen=True)
class ClientTask:
    kind: str  # title | tags | follow_ups | queries | text | other (bounded: a metric label)
    prompt: str


def detect(conversation: list[Message], pattern: str) -> ClientTask | None:
    """A client task when the last user message starts with the configured pattern."""
    users = [m for m in conversation if m.get("role") == "user"]
    prompt = users[-1].get("content") if users else None
    if not pattern or not isinstance(prompt, str) or not re.match(pattern, prompt):
        return None
    key = OUTPUT_KEY.search(prompt)
    return ClientTask(key.group(1) if key else "other", prompt)


def local_answer(task: ClientTask) -> str:
    """A deterministic answer in the shape the client asked for, made without the model."""
    if task.kind == "title":
        return json.dumps({"title": _title(task.prompt)}, ensure_ascii=False)
    if task.kind in EMPTY:
        return json.dumps({task.kind: EMPTY[task.kind]})
    return ""


def _title(prompt: str) -> str:
    """The first words of the first user line in the chat history."""
    history = HISTORY.search(prompt)
    for line in (history.group(1) if history else "").splitlines():
        if line.strip().upper().startswith("USER:"):
            words = re.sub(r"[^\w\s?'-]", " ", line.split(":", 1)[1]).split()
            if words:
                return " ".join(words[:TITLE_WORDS])
    return "Chat"


class TaskRunner:
    """Serves one client task as events shaped like a tool-loop answer (no tools, no footer)."""

    def __init__(self, settings: Settings, backend: ModelBackend) -> None:
        self.settings, self.backend = settings, backend

    async def run(
        self, task: ClientTask, conversation: list[Message], model: str, context: RequestContext
    ) -> AsyncIterator[LoopEvent]:
        mode, usage, rounds = self.settings.client_tasks, Usage(), 0
        answer: str | None = None
        if mode == "model":
            rounds = 1
            answer = await self._model_answer(conversation, model, context, usage)
        served = "model" if answer is not None else ("off" if mode == "off" else "local")
        if answer is None:
            answer = "" if mode == "off" else local_answer(task)
        metrics.CLIENT_TASKS.labels(task.kind, served).inc()
        log.info("client_task_served", kind=task.kind, served=served)
        if answer:
            yield TextEvent(answer)
        yield FinalEvent(answer, "stop", usage, rounds, [])

    async def _model_answer(
        self, conversation: list[Message], model: str, context: RequestContext, usage: Usage
    ) -> str | None:
        """One tool-less round at task priority; None when the GPU is busy, the task was preempted or failed,
        or the model wrote no text."""
        options = {**self.settings.round_options(), "num_predict": self.settings.client_task_max_tokens}
        request = RoundRequest(
            model=model,
            messages=conversation,
            tools=None,
            options=options,
            think=False,
            request_id=context.request_id,
            priority="task",
        )
        text: list[str] = []
        try:
            async for event in self.backend.stream_round(request, context):
                if isinstance(event, TextDelta):
                    text.append(event.text)
                elif isinstance(event, RoundDone):
                    usage.prompt_tokens, usage.completion_tokens = event.prompt_tokens, event.completion_tokens
        except AgentError as exc:
            log.info("client_task_fell_back", reason=type(exc).__name__, detail=exc.message)
            return None
        return "".join(text).strip() or None  # nothing usable (e.g. it wanted a tool): the local answer
