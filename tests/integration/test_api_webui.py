"""What Open WebUI does to the agent, through the real openai SDK and ollama client: background tasks, the
read-only endpoints it calls, history with our footer, errors mid-stream and the audit of non-streaming chats."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import ollama as ollama_client
import openai
import pytest

from tests.integration.conftest import FakeOllama, McpServer, agent_env
from tests.support.procs import free_port, running, wait_until

TITLE = (
    "### Task:\nGenerate a concise, 3-5 word title with an emoji summarizing the chat history.\n### Output:\n"
    'JSON format: { "title": "your concise title here" }\n### Chat History:\n<chat_history>\n'
    "USER: Saat kaç?\nASSISTANT: 14:05\n</chat_history>"
)
CLOCK = {
    "when": {"user_contains": "saat", "last_role": "user", "has_tools": True},
    "reply": {"tool_calls": [{"name": "sistem_bilgisi", "arguments": {}}]},
}


class Api:
    def __init__(self, url: str, audit_dir: Path) -> None:
        self.url, self.audit_dir = url, audit_dir

    def audit(self) -> list[dict[str, Any]]:
        path = self.audit_dir / "audit.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture(scope="module")
def api(fake_ollama: FakeOllama, mcp_server: McpServer) -> Iterator[Api]:
    port, audit_dir = free_port(), Path(tempfile.mkdtemp(prefix="agent-audit-"))
    env = agent_env(fake_ollama.url, mcp_server, port, AUDIT_DIR=str(audit_dir), CLIENT_TASKS="model")
    with running(["agent-api"], env=env, ready_url=f"http://127.0.0.1:{port}/healthz"):
        yield Api(f"http://127.0.0.1:{port}", audit_dir)


@pytest.fixture
def sdk(api: Api) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=f"{api.url}/v1", api_key="unused", max_retries=0) as client:
        yield client


@pytest.fixture
def oc(api: Api) -> Iterator[ollama_client.Client]:
    with ollama_client.Client(host=api.url) as client:
        yield client


def test_a_title_task_is_one_round_without_tools_and_audited_as_a_task(
    api: Api, sdk: openai.OpenAI, ollama: FakeOllama
) -> None:
    ollama.script(rules=[CLOCK], default={"content": '{"title": "🕑 Current time"}'})
    reply = sdk.chat.completions.create(
        model="qwen3:4b",
        messages=[{"role": "user", "content": TITLE}],
        tools=[{"type": "function", "function": {"name": "web_search", "parameters": {"type": "object"}}}],
    )
    assert reply.choices[0].message.content == '{"title": "🕑 Current time"}'  # no footer, no tool loop
    (sent,) = ollama.requests()
    assert "tools" not in sent and sent["messages"] == [{"role": "user", "content": TITLE}]
    assert sent["options"]["num_predict"] == 128 and sent["think"] is False
    record = api.audit()[-1]
    assert record["kind"] == "client_task" and record["task"] == "title" and record["status"] == 200
    assert record["question"] is None and record["tool_calls"] == [] and record["user"] == "anonymous"


def test_a_task_the_model_answers_with_a_tool_call_gets_the_local_answer(
    api: Api, oc: ollama_client.Client, ollama: FakeOllama
) -> None:
    ollama.script(
        rules=[{"when": {"user_contains": "saat"}, "reply": {"tool_calls": [{"name": "x", "arguments": {}}]}}]
    )
    reply = oc.chat(model="qwen3:4b", messages=[{"role": "user", "content": TITLE}], stream=False)
    assert json.loads(reply.message.content or "") == {"title": "Saat kaç?"}
    assert api.audit()[-1]["tool_calls"] == []


def test_a_user_question_is_audited_as_a_chat(api: Api, sdk: openai.OpenAI, ollama: FakeOllama) -> None:
    ollama.script(rules=[CLOCK])
    sdk.chat.completions.create(model="qwen3:4b", messages=[{"role": "user", "content": "Saat kaç?"}])
    record = api.audit()[-1]
    assert record["kind"] == "chat" and record["question"] == "Saat kaç?" and record["rounds"] == 2


def test_non_streaming_ollama_chat_is_audited_200(api: Api, oc: ollama_client.Client, ollama: FakeOllama) -> None:
    before = len(api.audit())
    oc.chat(model="qwen3:4b", messages=[{"role": "user", "content": "merhaba"}], stream=False)
    wait_until(lambda: len(api.audit()) > before, timeout=5, what="the audit record")
    record = api.audit()[-1]
    assert record["endpoint"] == "/api/chat" and record["status"] == 200 and record["error"] is None


def test_our_footer_is_cut_from_the_history_the_model_reads(
    api: Api, oc: ollama_client.Client, ollama: FakeOllama
) -> None:
    history = [
        {"role": "user", "content": "Saat kaç?"},
        {"role": "assistant", "content": "14:05\n\n---\nTools used: sistem_bilgisi"},
        {"role": "user", "content": "teşekkürler"},
    ]
    oc.chat(model="qwen3:4b", messages=history, stream=False)
    sent = ollama.requests()[-1]["messages"]
    assert [m["content"] for m in sent if m["role"] == "assistant"] == ["14:05"]


def test_an_error_mid_answer_is_readable_on_the_ollama_connection(
    api: Api, oc: ollama_client.Client, ollama: FakeOllama
) -> None:
    ollama.script(default={"content": "one two three four", "stream_error": {"after_tokens": 2, "message": "boom"}})
    seen: list[str] = []
    with pytest.raises(ollama_client.ResponseError) as err:
        for part in oc.chat(model="qwen2.5:3b", messages=[{"role": "user", "content": "hi"}], stream=True):
            seen.append(part.message.content or "")
    text = "".join(seen)
    assert text.startswith("one two") and "⚠️ The model failed while answering" in text  # what Open WebUI shows
    assert "boom" not in text and "boom" not in str(err.value) and "127.0.0.1" not in str(err.value)


def test_read_only_endpoints_in_each_protocol_shape(api: Api, sdk: openai.OpenAI, oc: ollama_client.Client) -> None:
    assert sdk.models.retrieve("qwen2.5:3b").id == "qwen2.5:3b"
    with pytest.raises(openai.NotFoundError) as missing:
        sdk.models.retrieve("llama9")
    assert missing.value.body["code"] == "model_not_found"  # type: ignore[index]
    loaded = oc.ps()
    assert sorted(m.model or "" for m in loaded.models) == ["qwen2.5:3b", "qwen3:4b"]
    shown = oc.show("qwen3:4b")
    assert shown.details is not None and shown.details.family == "qwen3" and shown.capabilities == ["completion"]
    with pytest.raises(ollama_client.ResponseError) as unknown:
        oc.show("llama9")
    assert unknown.value.status_code == 404 and "llama9" in unknown.value.error
    assert httpx.get(f"{api.url}/api/ps", timeout=10).json()["models"][0]["size_vram"] == 0


def test_clients_other_than_a_chat_screen_stream_without_its_unfinished_mark(
    api: Api, sdk: openai.OpenAI, ollama: FakeOllama
) -> None:
    """The status event is for a front-end key naming its user only: the SDK and curl read the stream as before."""
    ollama.script(default={"content": "İki çekim bekliyor."})
    question = "Kaç çekim onay bekliyor?"
    chunks = list(
        sdk.chat.completions.create(model="qwen3:4b", messages=[{"role": "user", "content": question}], stream=True)
    )
    assert chunks[0].choices[0].delta.role == "assistant"
    assert all("event" not in (chunk.model_extra or {}) for chunk in chunks)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices).startswith("İki çekim bekliyor.")
    body = {"model": "qwen3:4b", "messages": [{"role": "user", "content": question}], "stream": True}
    raw = httpx.post(f"{api.url}/v1/chat/completions", json=body, timeout=60).text
    assert '"event"' not in raw and "tamamlanmadı" not in raw and raw.endswith("data: [DONE]\n\n")
