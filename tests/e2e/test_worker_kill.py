"""A worker killed mid-round: the request fails fast and clearly, and the stack recovers after a restart."""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx
import pytest

from tests.e2e.fake import PLAIN_MODEL, chat_body, script, stats
from tests.e2e.stack import Stack, run
from tests.support import sse
from tests.support.procs import wait_until

pytestmark = pytest.mark.e2e

SLOW = {"default": {"content": " ".join(f"word{i}" for i in range(60))}, "token_delay": 0.25}


def stream_events(api: str, headers: dict[str, str], sink: list[dict[str, Any]], done: threading.Event) -> None:
    body = chat_body("long answer", stream=True, model=PLAIN_MODEL)
    sse.collect(f"{api}/v1/chat/completions", body, sink, done, headers=headers, read_timeout=90)


def test_killed_worker_fails_the_round_fast_then_the_stack_recovers(stack: Stack) -> None:
    script(stack, SLOW)
    api = stack.url("agent-api", 8000)
    events: list[dict[str, Any]] = []
    done = threading.Event()
    threading.Thread(target=stream_events, args=(api, stack.headers, events, done), daemon=True).start()
    # Kill only once tokens flow, so the API cannot silently retry the round elsewhere.
    wait_until(
        lambda: any(e.get("choices") and e["choices"][0]["delta"].get("content") for e in events),
        timeout=30,
        what="first streamed token",
    )
    run(["docker", "kill", "--signal", "KILL", stack.container("agent-worker")])
    killed_at = time.monotonic()
    assert done.wait(60), "the request hung after its worker was killed"
    elapsed = time.monotonic() - killed_at
    errors = [e for e in events if "error" in e or "transport_error" in e]
    assert errors, f"stream ended without an error event: {events[-3:]}"
    assert elapsed < 30, f"failure took {elapsed:.1f}s to reach the client"
    assert not any(e.get("choices") and e["choices"][0].get("finish_reason") == "stop" for e in events)

    stack.compose("start", "agent-worker")
    wait_until(
        lambda: stack.inspect("agent-worker")["State"].get("Health", {}).get("Status") == "healthy",
        timeout=90,
        interval=1,
        what="agent-worker healthy again",
    )
    script(stack, {"default": {"content": "back again"}})
    reply = httpx.post(f"{api}/v1/chat/completions", json=chat_body("hello"), headers=stack.headers, timeout=60)
    assert reply.status_code == 200, reply.text
    assert "back again" in reply.json()["choices"][0]["message"]["content"]
    assert stats(stack)["peak"] == 1
