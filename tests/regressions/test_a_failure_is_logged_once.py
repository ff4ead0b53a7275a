"""Regression (issue 35, "errors logged once"): a round that failed before the first token was logged twice by
agent-api — once by the audit trail the loop's events pass through, once more by the exception handler that
answers the HTTP error — so an operator counting `request_failed` lines counted every such failure twice."""

from __future__ import annotations

from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import pytest
import structlog

from agent.errors import DependencyDown
from agent.security.auth import add_key
from tests.regressions.test_look_alike_identities import POLICY
from tests.unit.agent.security.test_auth import api, bearer, settings_for

DOWN = "Ollama is unreachable at http://ollama:11434"


def failures(logs: list[MutableMapping[str, Any]]) -> list[MutableMapping[str, Any]]:
    return [line for line in logs if line["log_level"] in ("warning", "error", "critical")]


@pytest.mark.parametrize(
    ("path", "stream"), [("/v1/chat/completions", False), ("/v1/chat/completions", True), ("/api/chat", True)]
)
async def test_a_failure_before_the_first_token_is_one_log_line(tmp_path: Path, path: str, stream: bool) -> None:
    (tmp_path / "policy.yaml").write_text(POLICY)
    key = add_key(tmp_path / "keys.yaml", "script", "guest")
    body = {"model": "qwen3:4b", "messages": [{"role": "user", "content": "how many?"}], "stream": stream}
    async with api(settings_for(tmp_path), [DependencyDown(DOWN)]) as (http, _):
        with structlog.testing.capture_logs() as logs:
            resp = await http.post(path, json=body, headers=bearer(key))
    assert resp.status_code == 503
    lines = failures(logs)
    assert [line["event"] for line in lines] == ["request_failed"], lines
    assert lines[0]["status"] == 503 and lines[0]["message"] == DOWN  # the operator's detail, on that one line


async def test_a_failure_mid_answer_is_still_logged(tmp_path: Path) -> None:
    """Once the first token is out the error ends the stream instead of reaching the exception handler: the
    audit trail's line is then the only one, and it stays."""
    (tmp_path / "policy.yaml").write_text(POLICY)
    key = add_key(tmp_path / "keys.yaml", "script", "admin")
    body = {"model": "qwen3:4b", "messages": [{"role": "user", "content": "how many?"}], "stream": True}
    async with api(settings_for(tmp_path), [[("sistem_bilgisi", {})], DependencyDown(DOWN)]) as (http, _):
        with structlog.testing.capture_logs() as logs:
            resp = await http.post("/v1/chat/completions", json=body, headers=bearer(key))
    assert resp.status_code == 200 and "error" in resp.text
    assert [line["event"] for line in failures(logs)] == ["request_failed"]
