"""/readyz called every served model "missing" when the worker or Redis was down: it must name what is down.

Real agent-api processes in queue mode: one whose Redis does not answer, one whose Redis has no worker.
"""

from __future__ import annotations

from typing import Any

import httpx

from tests.integration import queue_fixtures
from tests.integration.conftest import McpServer, agent_env
from tests.integration.queue_fixtures import RedisServer
from tests.support.procs import free_port, running
from tests.support.readiness import details

queue_redis = queue_fixtures.queue_redis


def readyz(mcp: McpServer, redis_url: str) -> dict[str, Any]:
    port = free_port()
    env = agent_env(f"http://127.0.0.1:{free_port()}", mcp, port, MODEL_BACKEND="queue", REDIS_URL=redis_url)
    with running(["agent-api"], env=env, ready_url=f"http://127.0.0.1:{port}/healthz"):
        resp = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=30)
        assert resp.status_code == 503 and resp.json()["checks"]["model"] == "not ready"
        return dict(details(f"http://127.0.0.1:{port}", timeout=30)["model"])


def test_redis_down_is_not_a_missing_model(mcp_server: McpServer) -> None:
    model = readyz(mcp_server, f"redis://127.0.0.1:{free_port()}/0")
    assert model["ok"] is False and model["missing"] == []
    assert "Redis unreachable" in model["fix"] and "ollama pull" not in model["fix"]


def test_no_worker_is_not_a_missing_model(mcp_server: McpServer, queue_redis: RedisServer) -> None:
    model = readyz(mcp_server, queue_redis.url)
    assert model["ok"] is False and model["missing"] == []
    assert "no agent-worker is running" in model["fix"]
