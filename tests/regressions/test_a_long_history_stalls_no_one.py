"""Issue 36: the answer (grounding) check ran on agent-api's event loop, so a 199-message history full of figures
(886 KB, within MAX_BODY_BYTES and MAX_MESSAGES) cost ~1 s of API CPU per request and every other request, /healthz
included, waited 958-1060 ms. The check now runs on its own thread with a budget (ANSWER_CHECK_BUDGET_SECONDS):
/healthz answers under 150 ms while such a history is being checked, and the answer still comes."""

from __future__ import annotations

import random
import threading
import time

import httpx

from tests.integration.conftest import AgentApi, FakeOllama


def figures(seed: int, chars: int) -> str:
    """`chars` of distinct amounts, as a statement or an earlier answer would list them (seeded: the same each run)."""
    rng, parts, size = random.Random(seed), [], 0
    while size < chars:
        part = f"account {seed}-{size} holds {rng.randint(1, 10**7):,}.{rng.randint(0, 99):02d} USD; "
        parts.append(part)
        size += len(part)
    return "".join(parts)


def history() -> list[dict[str, str]]:
    """199 messages, ~880 KB of figures: within MAX_BODY_BYTES (1 MB) and MAX_MESSAGES (200)."""
    messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": figures(i, 4_400)} for i in range(198)]
    return [*messages, {"role": "user", "content": "how many dollars were deposited today?"}]


def test_healthz_stays_fast_while_a_figure_filled_history_is_checked(agent_api: AgentApi, ollama: FakeOllama) -> None:
    answer = "Deposits today: " + figures(999, 400)  # ~20 amounts, none from a tool: every one is sought in the history
    ollama.script(default={"content": answer})
    body = {"model": "qwen3:4b", "messages": history(), "stream": False}
    assert 850_000 < len(httpx.Request("POST", "http://x", json=body).content) < 1_000_000
    latencies: list[float] = []
    done = threading.Event()

    def poll() -> None:
        with httpx.Client(base_url=agent_api.url, timeout=10) as client:
            while not done.is_set():
                started = time.perf_counter()
                assert client.get("/healthz").status_code == 200
                latencies.append(time.perf_counter() - started)
                time.sleep(0.01)

    poller = threading.Thread(target=poll)
    poller.start()
    try:
        for _ in range(3):  # several checks, so polls land while one runs
            resp = httpx.post(f"{agent_api.url}/v1/chat/completions", json=body, timeout=120)
            assert resp.status_code == 200 and answer in resp.json()["choices"][0]["message"]["content"]
    finally:
        done.set()
        poller.join()
    assert len(latencies) > 10
    assert max(latencies) < 0.150, sorted(latencies)[-5:]
