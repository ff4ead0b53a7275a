"""Prometheus scrapes every service by its service name and has data for every dashboard panel."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.e2e.fake import chat_body, script
from tests.e2e.stack import Stack
from tests.e2e.test_config import panel_queries
from tests.support.procs import wait_until

pytestmark = pytest.mark.e2e


def query(prom: str, expr: str) -> list[dict[str, Any]]:
    body = httpx.get(f"{prom}/api/v1/query", params={"query": expr}, timeout=10).json()
    assert body["status"] == "success", (expr, body)
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


def test_every_service_is_scraped_under_its_service_name(stack: Stack) -> None:
    prom = stack.url("prometheus", 9090)
    wanted = {"agent-api", "agent-worker", "mcp-server"}

    def all_up() -> bool:
        return {r["metric"]["job"] for r in query(prom, "up == 1")} >= wanted

    wait_until(all_up, timeout=60, interval=1, what="agent-api, agent-worker and mcp-server up in Prometheus")


def test_every_dashboard_panel_has_data(stack: Stack) -> None:
    # Traffic that touches every panel: tool calls (one failing), rounds, tokens, the queue.
    script(
        stack,
        {
            "rules": [
                {
                    "when": {"user_contains": "saat", "last_role": "user"},
                    "reply": {"tool_calls": [{"name": "sistem_bilgisi", "arguments": {}}]},
                },
                {
                    "when": {"user_contains": "dosya", "last_role": "user"},
                    "reply": {"tool_calls": [{"name": "dosya_oku", "arguments": {"path": "../../etc/passwd"}}]},
                },
                {"when": {"last_role": "tool"}, "reply": {"content": "Done: {tool_result}"}},
            ]
        },
    )
    api = stack.url("agent-api", 8000)
    prom = stack.url("prometheus", 9090)
    queries = panel_queries()

    def empty_panels() -> list[str]:
        for text in ("saat kaç", "dosya oku"):
            httpx.post(
                f"{api}/v1/chat/completions", json=chat_body(text), headers=stack.headers, timeout=60
            ).raise_for_status()
        return [f"{title}: {expr}" for title, expr in queries if not query(prom, expr)]

    missing: list[str] = []

    def all_have_data() -> bool:
        missing[:] = empty_panels()
        return not missing

    try:
        wait_until(all_have_data, timeout=120, interval=5, what="data for every panel")
    except TimeoutError as exc:
        raise AssertionError("panels without data:\n" + "\n".join(missing)) from exc
