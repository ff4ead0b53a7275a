"""A second GPU added the documented way (compose.gpu1.yml) is scraped by Prometheus as its own target.

Before the recipe shipped, Prometheus discovered only workers named `agent-worker`: a second GPU served
rounds but was invisible to the dashboard and to the worker-down alert. The pair is started on the running
e2e stack exactly as an operator would (`up -d` with the extra file); only ollama-1 is swapped for the
scripted Ollama (tests/e2e/compose.gpu1-standin.yml), as compose.e2e.yml does for `ollama`.
"""

from __future__ import annotations

import httpx
import pytest

from tests.e2e.stack import COMPOSE_FILES, REPO, Stack, run
from tests.e2e.test_metrics import query
from tests.support.procs import wait_until

pytestmark = pytest.mark.e2e

GPU1_FILES = [*COMPOSE_FILES, "compose.gpu1.yml", "tests/e2e/compose.gpu1-standin.yml"]


def compose_gpu1(stack: Stack, *args: str) -> None:
    files = [arg for name in GPU1_FILES for arg in ("-f", name)]
    run(["docker", "compose", "-p", stack.project, *files, *args], env=stack.env, timeout=300)


def test_a_second_gpu_added_the_documented_way_is_scraped(stack: Stack) -> None:
    assert (REPO / "compose.gpu1.yml").is_file()
    prom = stack.url("prometheus", 9090)
    try:
        compose_gpu1(stack, "up", "-d", "--wait", "--wait-timeout", "120", "ollama-1", "agent-worker-1")

        def both_workers_scraped() -> bool:
            up = query(prom, 'up{job="agent-worker"} == 1')
            busy = {r["metric"].get("gpu") for r in query(prom, "agent_gpu_busy")}
            return len(up) == 2 and {"gpu0", "gpu1"} <= busy

        wait_until(both_workers_scraped, timeout=120, interval=2, what="two agent-worker targets, gpu0 and gpu1")
        targets = httpx.get(f"{prom}/api/v1/targets", timeout=10).json()["data"]["activeTargets"]
        workers = [t for t in targets if t["labels"]["job"] == "agent-worker"]
        assert len({t["labels"]["instance"] for t in workers}) == 2
    finally:
        compose_gpu1(stack, "rm", "-s", "-f", "ollama-1", "agent-worker-1")
