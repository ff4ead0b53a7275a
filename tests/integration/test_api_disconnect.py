"""A client that goes away mid-answer stops the generation at Ollama (the GPU is not kept busy for nobody)."""

from __future__ import annotations

import httpx
import pytest

from tests.integration.conftest import AgentApi, FakeOllama
from tests.support.procs import wait_until


@pytest.mark.parametrize(("path", "extra"), [("/v1/chat/completions", {"stream": True}), ("/api/chat", {})])
def test_disconnect_mid_stream_cancels_the_generation(
    agent_api: AgentApi, ollama: FakeOllama, path: str, extra: dict[str, object]
) -> None:
    ollama.script(default={"content": "word " * 200, "token_delay": 0.05})
    body = {"model": "qwen2.5:3b", "messages": [{"role": "user", "content": "talk a lot"}], **extra}
    with httpx.Client(timeout=30) as http, http.stream("POST", f"{agent_api.url}{path}", json=body) as resp:
        assert resp.status_code == 200
        next(resp.iter_lines())
    wait_until(lambda: ollama.stats()["cancelled"] == 1, timeout=5, what="the fake to see the generation cancelled")
    assert ollama.requests()[-1]["outcome"] == "cancelled"


def test_disconnect_of_a_non_streaming_request_cancels_too(agent_api: AgentApi, ollama: FakeOllama) -> None:
    ollama.script(default={"content": "word " * 200, "token_delay": 0.05})
    body = {"model": "qwen2.5:3b", "messages": [{"role": "user", "content": "talk a lot"}]}
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{agent_api.url}/v1/chat/completions", json=body, timeout=1.0)
    wait_until(lambda: ollama.stats()["cancelled"] == 1, timeout=5, what="the fake to see the generation cancelled")
