"""Client background tasks: Open WebUI's prompts recognised, answered by one tool-less round or locally."""

from __future__ import annotations

import json

import pytest

from agent.context import RequestContext
from agent.errors import QueueFull
from agent.loop.events import FinalEvent, TextEvent
from agent.loop.tasks import ClientTask, TaskRunner, detect, local_answer
from agent.settings import Settings
from tests.unit.agent.conftest import ScriptedBackend

PATTERN = Settings().client_task_pattern
HISTORY = "<chat_history>\nUSER: How many dollars were deposited today?\nASSISTANT: 1,250 USD.\n</chat_history>"
# Open WebUI 0.12's default task templates, shortened to their recognisable parts.
TITLE = (
    "### Task:\nGenerate a concise, 3-5 word title with an emoji summarizing the chat history.\n### Guidelines:\n"
    '- ...\n### Output:\nJSON format: { "title": "your concise title here" }\n### Chat History:\n' + HISTORY
)
TAGS = '### Task:\nGenerate 1-3 broad tags.\n### Output:\nJSON format: { "tags": ["tag1", "tag2", "tag3"] }\n' + HISTORY
FOLLOW_UPS = '### Task:\nSuggest 3-5 follow-up questions.\n### Output:\nJSON format: { "follow_ups": ["Q?"] }\n'


def convo(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


@pytest.mark.parametrize(("prompt", "kind"), [(TITLE, "title"), (TAGS, "tags"), (FOLLOW_UPS, "follow_ups")])
def test_open_webui_tasks_are_recognised_by_kind(prompt: str, kind: str) -> None:
    task = detect(convo(prompt), PATTERN)
    assert task is not None and task.kind == kind


def test_questions_are_not_tasks_and_the_pattern_is_configurable() -> None:
    assert detect(convo("How many dollars were deposited? ### Task: none"), PATTERN) is None
    assert detect(convo(TITLE), "") is None  # recognition switched off
    custom = detect(convo("[[bg]] title please"), r"\[\[bg\]\]")
    assert custom is not None and custom.kind == "other"


def detected(text: str) -> ClientTask:
    task = detect(convo(text), PATTERN)
    assert task is not None, text
    return task


def test_local_answers_have_the_shape_asked_for() -> None:
    assert json.loads(local_answer(detected(TITLE))) == {"title": "How many dollars were deposited today?"}
    assert json.loads(local_answer(detected(TAGS))) == {"tags": []}
    assert json.loads(local_answer(detected(FOLLOW_UPS))) == {"follow_ups": []}


async def run(settings: Settings, backend: ScriptedBackend, prompt: str = TITLE) -> list[object]:
    task = detect(convo(prompt), PATTERN)
    assert task is not None
    return [e async for e in TaskRunner(settings, backend).run(task, convo(prompt), "qwen3:4b", RequestContext("rid"))]


async def test_model_mode_is_one_tool_less_task_round_without_our_system_prompt() -> None:
    backend = ScriptedBackend(['{"title": "Deposits today"}'])
    events = await run(Settings(client_tasks="model"), backend)
    (request,) = backend.requests
    assert request.tools is None and request.priority == "task" and request.think is False
    assert request.messages == convo(TITLE) and request.options["num_predict"] == 128
    final = events[-1]
    assert isinstance(final, FinalEvent) and final.answer == '{"title": "Deposits today"}' and final.trace == []


async def test_a_busy_gpu_gets_the_local_answer() -> None:
    backend = ScriptedBackend([QueueFull("user rounds are waiting")])
    events = await run(Settings(client_tasks="model"), backend)
    assert isinstance(events[0], TextEvent) and json.loads(events[0].text)["title"].startswith("How many")


async def test_local_and_off_never_touch_the_model() -> None:
    backend = ScriptedBackend([])
    assert Settings().client_tasks == "local"  # the default: the GPU only serves questions (open-webui.md)
    local = await run(Settings(client_tasks="local"), backend, TAGS)
    off = await run(Settings(client_tasks="off"), backend, TAGS)
    assert backend.requests == []
    assert isinstance(local[0], TextEvent) and json.loads(local[0].text) == {"tags": []}
    assert len(off) == 1 and isinstance(off[0], FinalEvent) and off[0].answer == "" and off[0].rounds == 0
