"""Issue 36: the answer (grounding) check ran on agent-api's event loop, so a 199-message history full of figures
(886 KB, within MAX_BODY_BYTES and MAX_MESSAGES) cost ~1 s of API CPU per request and every other request, /healthz
included, waited 958-1060 ms. The check now runs on its own thread with a budget (ANSWER_CHECK_BUDGET_SECONDS):
/healthz is not held up by it while such a history is being checked, and the answer still comes.

No wall-clock figure: on a loaded machine everything slows together, so the longest /healthz wait is compared with
the longest chat request of the same run (the one that checked longest: a later one may check much less, seen at
74 ms after a first one's 794 ms, so the shortest is no measure of a check). On the loop, a poll landing as a check
starts waits for the whole check, most of its request (measured: ~1 s of a ~1.2 s request); off the loop it waits
at most for the body's parsing, which stays on the loop (measured: up to ~0.3 s of a 1.1 s request on a loaded
2-core box)."""

from __future__ import annotations

import threading
import time

import httpx

from tests.integration.conftest import AgentApi, FakeOllama
from tests.support.figure_history import history, invented_answer


def test_healthz_stays_fast_while_a_figure_filled_history_is_checked(agent_api: AgentApi, ollama: FakeOllama) -> None:
    answer = invented_answer()
    ollama.script(default={"content": answer})
    body = {"model": "qwen3:4b", "messages": history(), "stream": False}
    assert 850_000 < len(httpx.Request("POST", "http://x", json=body).content) < 1_000_000
    latencies: list[float] = []
    requests: list[float] = []
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
            started = time.perf_counter()
            resp = httpx.post(f"{agent_api.url}/v1/chat/completions", json=body, timeout=120)
            requests.append(time.perf_counter() - started)
            assert resp.status_code == 200 and answer in resp.json()["choices"][0]["message"]["content"]
    finally:
        done.set()
        poller.join()
    assert len(latencies) > 10
    assert max(latencies) < 0.5 * max(requests), (sorted(latencies)[-5:], requests)
