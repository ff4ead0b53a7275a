"""agent-worker's slot processes: the event loop every round runs on."""

from __future__ import annotations

import uvloop

from agent.queue import jobs
from agent.settings import Settings


def test_a_slot_process_runs_its_rounds_on_uvloop() -> None:
    # A round is a chain of socket reads, writes and callbacks: uvloop's made the GPU's idle gap between two
    # generations ~0.35 ms shorter. Building the runtime connects to nothing.
    rt = jobs.start_runtime(Settings(redis_url="redis://127.0.0.1:1/0", ollama_url="http://127.0.0.1:1"), "w-test")
    try:
        assert isinstance(rt.loop, uvloop.Loop)
        assert jobs._runtime == [rt]  # what run_round, RQ's job function, runs rounds on
    finally:
        jobs.stop_runtime(rt)
    assert jobs._runtime == []
