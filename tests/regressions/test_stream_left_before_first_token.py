"""Regression (issue 11, item 4): a streaming client that left before its first token was not cancelled —
the agent waited for the first event without watching the connection, so its round still ran on the GPU
(audited 499 after 17 s). Now the generation stops as soon as the client is gone."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from tests.integration.conftest import AgentApi, FakeOllama
from tests.support.procs import wait_until

pytestmark = pytest.mark.integration
FIRST_TOKEN_AFTER = 8.0


@pytest.mark.parametrize(("path", "extra"), [("/v1/chat/completions", {"stream": True}), ("/api/chat", {})])
def test_leaving_before_the_first_token_stops_the_generation(
    agent_api: AgentApi, ollama: FakeOllama, path: str, extra: dict[str, object]
) -> None:
    ollama.script(default={"content": "word " * 50}, first_token_delay=FIRST_TOKEN_AFTER)
    body = {"model": "qwen2.5:3b", "messages": [{"role": "user", "content": "slow start"}], **extra}
    left = time.monotonic()
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{agent_api.url}{path}", json=body, timeout=1.0)  # gives up before any byte arrives
    wait_until(lambda: outcome(ollama) == "cancelled", timeout=FIRST_TOKEN_AFTER, what="the generation to stop")
    assert time.monotonic() - left < FIRST_TOKEN_AFTER - 2  # stopped well before its first token was due


def outcome(ollama: FakeOllama) -> str | None:
    """The outcome of this test's generation (a generation left over from an earlier test may end meanwhile)."""
    mine = [r for r in ollama.requests() if "slow start" in json.dumps(r.get("messages"))]
    return mine[-1].get("outcome") if mine else None
