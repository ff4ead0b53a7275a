"""agent-api's Ollama-compatible endpoints driven by the real `ollama` Python client."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import ollama as ollama_client
import pytest

from tests.integration.conftest import AgentApi, FakeOllama


@pytest.fixture
def oc(agent_api: AgentApi) -> Iterator[ollama_client.Client]:
    with ollama_client.Client(host=agent_api.url) as client:
        yield client


RULE = {
    "when": {"user_contains": "saat", "last_role": "user"},
    "reply": {"tool_calls": [{"name": "sistem_bilgisi", "arguments": {}}]},
}


def test_streaming_chat_ends_with_done_and_footer(
    agent_api: AgentApi, oc: ollama_client.Client, ollama: FakeOllama
) -> None:
    ollama.script(rules=[RULE])
    parts = list(oc.chat(model="qwen2.5:3b", messages=[{"role": "user", "content": "Saat kaç?"}], stream=True))
    assert parts[-1].done is True and parts[-1].done_reason == "stop"
    text = "".join(p.message.content or "" for p in parts)
    assert text.endswith("Tools used: sistem_bilgisi")
    assert sum(1 for p in parts if p.message.content) > 3


def test_non_streaming_chat(agent_api: AgentApi, oc: ollama_client.Client, ollama: FakeOllama) -> None:
    reply = oc.chat(model="qwen3:4b", messages=[{"role": "user", "content": "merhaba"}], stream=False)
    assert reply.message.content == "Hello! I am the scripted model."
    assert reply.done is True and (reply.eval_count or 0) > 0


def test_default_is_ndjson_stream(agent_api: AgentApi, oc: ollama_client.Client, ollama: FakeOllama) -> None:
    resp = httpx.post(
        f"{agent_api.url}/api/chat",
        timeout=30,
        json={"model": "qwen3:4b", "messages": [{"role": "user", "content": "hi"}]},
    )
    assert resp.headers["content-type"].startswith("application/x-ndjson")
    lines = [json.loads(line) for line in resp.text.splitlines()]
    assert [line["done"] for line in lines].count(True) == 1 and lines[-1]["done"] is True
    assert lines[-1]["local_agent"]["tools_used"] == []


def test_unknown_model_is_404_for_ollama_clients(agent_api: AgentApi, oc: ollama_client.Client) -> None:
    with pytest.raises(ollama_client.ResponseError) as err:
        oc.chat(model="llama9", messages=[{"role": "user", "content": "x"}])
    assert err.value.status_code == 404
    assert "llama9" in err.value.error


def test_tags_and_version(agent_api: AgentApi, oc: ollama_client.Client) -> None:
    names = [m.model for m in oc.list().models]
    assert names == ["qwen3:4b", "qwen2.5:3b"]
    assert httpx.get(f"{agent_api.url}/api/version").json()["version"]
